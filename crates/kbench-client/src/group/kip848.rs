use super::*;

/// The consumer protocol (KIP-848): ConsumerGroupHeartbeat.
impl GroupMember {
    /// Before the first join: the coordinator must serve ConsumerGroupHeartbeat (else one error
    /// naming it), and the topic's id be known (assignments name topics by id).
    pub(super) async fn start_kip848(&mut self) -> Result<(), ClientError> {
        let version = match self
            .cluster
            .version_on(&self.coordinator, ApiKey::ConsumerGroupHeartbeat)
        {
            Ok(v) => v,
            Err(e) => {
                return Err(ClientError::Other(format!(
                    "group.protocol=consumer needs ConsumerGroupHeartbeat (API key 68, KIP-848), which the coordinator of group {:?} at {} does not serve ({e}); use group.protocol=classic",
                    self.config.group_id,
                    self.coordinator.addr()
                )));
            }
        };
        let (_, layout) = self.cluster.metadata(&self.config.topic).await?;
        if layout.topic_id.is_nil() {
            return Err(ClientError::Other(format!(
                "group.protocol=consumer: the cluster gave no id for topic {:?} (KIP-848's assignments name topics by id; Metadata v10 or later has them)",
                self.config.topic
            )));
        }
        self.kip848.topic_id = layout.topic_id;
        // KIP-1082: from v1 the member makes up its own id; at v0 the coordinator gives one.
        if version >= 1 {
            self.member_id = uuid::Uuid::new_v4().to_string();
        }
        self.generation_id = 0;
        Ok(())
    }

    /// A heartbeat at `epoch`; `full` sends the subscription and the rebalance timeout (a join),
    /// and the owned partitions go with it when they changed since the last one sent. With the
    /// topic names goes an empty regex from v1, as librdkafka sends it (librdkafka's mock cluster
    /// aborts on names without one).
    pub(super) fn kip848_request(&self, epoch: i32, full: bool) -> ConsumerGroupHeartbeatRequest {
        let regex = full
            && self
                .cluster
                .version_on(&self.coordinator, ApiKey::ConsumerGroupHeartbeat)
                .is_ok_and(|v| v >= 1);
        // At epoch 0 (a join) the owned partitions must be an empty list: Kafka refuses a join
        // that claims any (INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining").
        let owned = (full || self.kip848.report_owned).then(|| {
            if epoch == 0 {
                Vec::new()
            } else {
                vec![
                    OwnedPartitions::default()
                        .with_topic_id(self.kip848.topic_id)
                        .with_partitions(self.assignment.clone()),
                ]
            }
        });
        ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(str_bytes(&self.config.group_id)))
            .with_member_id(str_bytes(&self.member_id))
            .with_instance_id(
                (full || epoch < 0)
                    .then(|| self.config.instance_id.as_deref().map(str_bytes))
                    .flatten(),
            )
            .with_member_epoch(epoch)
            .with_rebalance_timeout_ms(if full {
                self.config.rebalance_timeout.as_millis() as i32
            } else {
                -1
            })
            .with_subscribed_topic_names(
                full.then(|| vec![TopicName(str_bytes(&self.config.topic))]),
            )
            .with_subscribed_topic_regex(regex.then(|| str_bytes("")))
            .with_server_assignor(
                full.then(|| self.config.remote_assignor.as_deref().map(str_bytes))
                    .flatten(),
            )
            .with_topic_partitions(owned)
    }

    pub(super) async fn send_kip848(
        &self,
        request: &ConsumerGroupHeartbeatRequest,
    ) -> Result<ConsumerGroupHeartbeatResponse, ClientError> {
        let version = self
            .cluster
            .version_on(&self.coordinator, ApiKey::ConsumerGroupHeartbeat)?;
        self.coordinator
            .request_at(ApiKey::ConsumerGroupHeartbeat, version, request)
            .await
    }

    /// Take in an answer without an error: the epoch, the interval, and an assignment that
    /// differs from the one held (kept as the next one). Whether there is a next one.
    pub(super) fn heard_kip848(&mut self, response: &ConsumerGroupHeartbeatResponse) -> bool {
        if let Some(id) = response.member_id.as_ref()
            && !id.is_empty()
        {
            self.member_id = id.to_string();
        }
        self.generation_id = response.member_epoch;
        if response.heartbeat_interval_ms > 0 {
            self.kip848.interval =
                Some(Duration::from_millis(response.heartbeat_interval_ms as u64));
        }
        if let Some(assignment) = response.assignment.as_ref() {
            let mut mine: Vec<i32> = assignment
                .topic_partitions
                .iter()
                .filter(|t| t.topic_id == self.kip848.topic_id)
                .flat_map(|t| t.partitions.iter().copied())
                .collect();
            mine.sort_unstable();
            mine.dedup();
            self.kip848.given = mine.clone();
            self.kip848.next = (mine != self.assignment).then_some(mine);
        }
        self.kip848.next.is_some()
    }

    pub(super) async fn heartbeat_kip848(&mut self) -> Result<Membership, ClientError> {
        // A coordinator whose connection broke is looked up again first.
        if self.coordinator.is_broken() {
            self.new_coordinator().await?;
        }
        let request = self.kip848_request(self.generation_id, self.kip848.send_full);
        self.kip848.ack_due = false;
        let response = self.send_kip848(&request).await?;
        match response.error_code {
            0 => {
                self.kip848.report_owned = false;
                self.kip848.send_full = false;
                Ok(if self.heard_kip848(&response) {
                    Membership::RejoinNeeded
                } else {
                    Membership::Stable
                })
            }
            // The coordinator no longer counts this member (its session ran out) or its epoch:
            // its partitions are lost (not committed), and it joins again at epoch 0.
            UNKNOWN_MEMBER_ID | FENCED_MEMBER_EPOCH => {
                self.kip848.fenced = true;
                Ok(Membership::RejoinNeeded)
            }
            // The group moved (or its coordinator is not up yet): find it; the next heartbeat
            // goes there with the member's whole state. The membership itself is unchanged.
            NOT_COORDINATOR | COORDINATOR_NOT_AVAILABLE => {
                self.new_coordinator().await?;
                Ok(Membership::Stable)
            }
            COORDINATOR_LOAD_IN_PROGRESS => Ok(Membership::Stable),
            code => Err(group_error(
                "ConsumerGroupHeartbeat",
                &self.config.group_id,
                code,
            )),
        }
    }

    /// Look the group's coordinator up again; the next heartbeat sends the whole state.
    pub(super) async fn new_coordinator(&mut self) -> Result<(), ClientError> {
        self.coordinator = find_coordinator(&self.cluster, &self.config.group_id).await?;
        self.kip848.send_full = true;
        self.kip848.report_owned = true;
        self.kip848.ack_due = true;
        Ok(())
    }

    /// Take the next assignment (the partitions given up are no longer read; the next heartbeat
    /// says what is owned), or, fenced or new, join at epoch 0 and wait for the first assignment.
    pub(super) async fn rejoin_kip848(&mut self) -> Result<(), ClientError> {
        if self.coordinator.is_broken() {
            self.new_coordinator().await?;
        }
        if !self.kip848.fenced && self.generation_id > 0 {
            if let Some(next) = self.kip848.next.take() {
                self.assignment = next;
                self.kip848.report_owned = true;
                self.kip848.ack_due = true;
            }
            self.phases = (Duration::ZERO, Duration::ZERO);
            return Ok(());
        }
        self.assignment.clear();
        self.kip848.next = None;
        self.kip848.fenced = false;
        self.generation_id = 0;
        let joining = tokio::time::Instant::now();
        let deadline = joining + self.config.rebalance_timeout;
        loop {
            let request = self.kip848_request(self.generation_id, true);
            let answer = self.send_kip848(&request).await;
            let retry = match answer {
                Ok(response) if response.error_code == 0 => {
                    self.heard_kip848(&response);
                    // A member epoch means the member is in: its assignment is the one in the
                    // answer, or, when the answer has none, the last one given, unchanged (the
                    // mock cluster answers a member fenced and back so). Epoch 0 with no
                    // assignment: the partitions it is to have are still another member's.
                    if self.generation_id > 0 {
                        self.assignment = match self.kip848.next.take() {
                            Some(next) => next,
                            None => self.kip848.given.clone(),
                        };
                        // The first heartbeat after an assignment says it was taken.
                        self.kip848.report_owned = true;
                        self.kip848.ack_due = true;
                        self.kip848.send_full = false;
                        self.phases = (joining.elapsed(), Duration::ZERO);
                        return Ok(());
                    }
                    Ok(())
                }
                Ok(response) => Err(group_error(
                    "ConsumerGroupHeartbeat",
                    &self.config.group_id,
                    response.error_code,
                )),
                Err(e) => Err(e),
            };
            match retry {
                Ok(()) => {}
                Err(ClientError::Kafka { code, .. })
                    if code == NOT_COORDINATOR || code == COORDINATOR_NOT_AVAILABLE =>
                {
                    self.new_coordinator().await?;
                }
                Err(ClientError::Kafka { code, .. }) if code == COORDINATOR_LOAD_IN_PROGRESS => {}
                Err(ClientError::Kafka { code, .. })
                    if code == UNKNOWN_MEMBER_ID || code == FENCED_MEMBER_EPOCH =>
                {
                    self.generation_id = 0;
                }
                Err(ClientError::Disconnected { .. }) => {
                    self.new_coordinator().await?;
                }
                Err(e) => return Err(e),
            }
            if tokio::time::Instant::now() >= deadline {
                // A wait that ran out, not a refusal: the session tries again.
                return Err(ClientError::Timeout {
                    addr: self.coordinator.addr().to_string(),
                    api: format!(
                        "ConsumerGroupHeartbeat (group {:?}: no assignment within the rebalance timeout of joining)",
                        self.config.group_id
                    ),
                    timeout_ms: self.config.rebalance_timeout.as_millis() as u64,
                });
            }
            let wait = self
                .kip848
                .interval
                .unwrap_or(Duration::from_millis(100))
                .min(Duration::from_millis(500));
            tokio::time::sleep(wait).await;
        }
    }
}
