use super::*;

impl GroupMember {
    /// Find the coordinator, join the group and sync: on return the member has its partitions.
    /// Given up when `stop` is cancelled first: then `None`, and a
    /// member the coordinator had already given an id (KIP-394, or a round of a held join) sends
    /// LeaveGroup, waiting at most 5 s for it, so that the group's next join need not wait a
    /// session for it. (A coordinator that reads a connection's requests in order, as Kafka does,
    /// reads that leave only once it answers the held JoinGroup.)
    pub async fn join_until(
        cluster: Arc<Cluster>,
        config: GroupConfig,
        stop: &tokio_util::sync::CancellationToken,
    ) -> Result<Option<GroupMember>, ClientError> {
        let coordinator = tokio::select! {
            c = find_coordinator(&cluster, &config.group_id) => c?,
            _ = stop.cancelled() => return Ok(None),
        };
        let mut member = GroupMember::unjoined(cluster, config, coordinator);
        let joined = tokio::select! {
            r = member.first_join() => Some(r),
            _ = stop.cancelled() => None,
        };
        match joined {
            Some(r) => r.map(|()| Some(member)),
            None => {
                let _ = tokio::time::timeout(Duration::from_secs(5), member.leave()).await;
                Ok(None)
            }
        }
    }

    pub(super) fn unjoined(
        cluster: Arc<Cluster>,
        config: GroupConfig,
        coordinator: Arc<Connection>,
    ) -> GroupMember {
        GroupMember {
            cluster,
            config,
            coordinator,
            member_id: String::new(),
            generation_id: -1,
            assignment: Vec::new(),
            phases: (Duration::ZERO, Duration::ZERO),
            second_round: false,
            lost: false,
            kip848: Kip848::default(),
            leader: String::new(),
            synced_generation: -1,
            rebalance_signalled: false,
        }
    }

    pub(super) async fn first_join(&mut self) -> Result<(), ClientError> {
        if self.config.protocol == GroupProtocol::Consumer {
            self.start_kip848().await?;
        }
        self.rejoin().await
    }

    /// The heartbeat interval the coordinator set (the consumer protocol's); `None`: the
    /// member's own `heartbeat.interval.ms`.
    pub fn heartbeat_interval(&self) -> Option<Duration> {
        self.kip848.interval
    }

    /// How often this member heartbeats: the coordinator's interval (the consumer protocol's),
    /// else `configured` (`heartbeat.interval.ms`).
    pub fn heartbeat_every(&self, configured: Duration) -> Duration {
        self.kip848.interval.unwrap_or(configured)
    }

    /// How long until the next heartbeat is due, `since` the last one. None at all when the
    /// member has to tell the coordinator at once what it now owns (the consumer protocol, after
    /// it took an assignment or found a new coordinator): once, whatever the answer.
    pub fn heartbeat_due_in(&self, since: Duration, configured: Duration) -> Duration {
        if self.kip848.ack_due || self.second_round {
            return Duration::ZERO;
        }
        self.heartbeat_every(configured).saturating_sub(since)
    }

    /// The partitions read on through the next [`rejoin`](Self::rejoin), the others being given
    /// up before it: the consumer protocol's next assignment (known before the rejoin takes it),
    /// or, with the classic protocol rebalancing cooperatively, every partition the member owns
    /// (the rejoin's answer may take some away). `None` where every partition is given up: the
    /// classic protocol's eager rebalance, and a member fenced or lost.
    pub fn incoming(&self) -> Option<&[i32]> {
        if self.config.protocol == GroupProtocol::Classic {
            return (self.cooperative() && !self.lost).then_some(self.assignment.as_slice());
        }
        if self.kip848.fenced {
            return None;
        }
        self.kip848.next.as_deref()
    }

    /// Whether the member rebalances incrementally in the classic protocol (KIP-429): as Java
    /// decides it, when every assignor offered is cooperative (`cooperative-sticky` alone; Java's
    /// default `range, cooperative-sticky` stays eager until range is taken out).
    pub fn cooperative(&self) -> bool {
        self.config.protocol == GroupProtocol::Classic
            && self.offered().iter().all(|a| a.is_cooperative())
    }

    /// Whether what the member owned is lost (the coordinator no longer knows it, its generation
    /// or its epoch): given up without a commit, as Java's `onPartitionsLost`.
    pub fn owned_lost(&self) -> bool {
        self.lost || self.kip848.fenced
    }

    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    pub fn member_id(&self) -> &str {
        &self.member_id
    }

    pub fn generation_id(&self) -> i32 {
        self.generation_id
    }

    /// The classic protocol: the leader's member id in the last JoinGroup answer (empty before
    /// one, and with the consumer protocol, which has no leader).
    pub fn leader_id(&self) -> &str {
        &self.leader
    }

    /// Whether the last JoinGroup answer made this member the group's leader (the classic
    /// protocol).
    pub fn is_leader(&self) -> bool {
        !self.member_id.is_empty() && self.leader == self.member_id
    }

    pub fn assignment(&self) -> &[i32] {
        &self.assignment
    }

    /// The last successful join's phases: (JoinGroup held, SyncGroup).
    pub fn phases(&self) -> (Duration, Duration) {
        self.phases
    }

    pub fn group_id(&self) -> &str {
        &self.config.group_id
    }

    /// The assignors offered in JoinGroup: the configured ones, or range.
    pub(super) fn offered(&self) -> &[Assignor] {
        if self.config.assignors.is_empty() {
            &[Assignor::Range]
        } else {
            &self.config.assignors
        }
    }

    /// As the group's leader: every member's subscription read, the partition counts of the
    /// topics subscribed to (a topic the cluster does not know is left out, as Java leaves it),
    /// and the assignor the coordinator chose run over them.
    pub(super) async fn lead(
        &self,
        response: &JoinGroupResponse,
    ) -> Result<Vec<SyncGroupRequestAssignment>, ClientError> {
        let chosen = response.protocol_name.as_ref().map(|n| n.as_str());
        let assignor = match chosen {
            None => self.offered()[0],
            Some(name) => Assignor::by_protocol(name).ok_or_else(|| {
                ClientError::Frame(format!(
                    "JoinGroup: the coordinator chose the assignor {name:?}, which kbench did not offer"
                ))
            })?,
        };
        let mut members = Vec::with_capacity(response.members.len());
        for m in &response.members {
            let mut member = decode_subscription(&m.metadata, m.member_id.as_str())?;
            member.instance_id = m.group_instance_id.as_ref().map(|i| i.to_string());
            members.push(member);
        }
        let topics: std::collections::BTreeSet<&String> =
            members.iter().flat_map(|m| &m.topics).collect();
        let mut partitions = BTreeMap::new();
        for topic in topics {
            match self.cluster.metadata(topic).await {
                Ok((_, layout)) => {
                    partitions.insert(topic.clone(), layout.partitions.len() as i32);
                }
                // Our own topic must be there; another member's may not be (yet).
                Err(e) if *topic == self.config.topic => return Err(e),
                Err(_) => {}
            }
        }
        encode_assignment(&assignor.assign(&members, &partitions))
    }

    /// Whether the connection to the coordinator broke: heartbeats and commits cannot reach it
    /// until [`rejoin`](Self::rejoin) looks it up again.
    pub fn coordinator_lost(&self) -> bool {
        self.coordinator.is_broken()
    }

    /// JoinGroup then SyncGroup, keeping the member id across rounds. Rebalances in progress are
    /// retried for as long as the rebalance timeout allows.
    pub async fn rejoin(&mut self) -> Result<(), ClientError> {
        if self.config.protocol == GroupProtocol::Consumer {
            return self.rejoin_kip848().await;
        }
        self.second_round = false;
        if !self.cooperative() || self.lost {
            // Eager, or lost: nothing is owned through the join (and none claimed in it).
            self.assignment.clear();
        }
        let deadline = tokio::time::Instant::now() + self.config.rebalance_timeout;
        loop {
            // A coordinator whose connection broke (it restarted, say) is looked up again.
            if self.coordinator.is_broken() {
                self.coordinator = find_coordinator(&self.cluster, &self.config.group_id).await?;
                self.forget_generation();
            }
            match self.join_and_sync().await {
                Ok(()) => return Ok(()),
                Err(ClientError::Kafka { code, .. })
                    if (code == REBALANCE_IN_PROGRESS
                        || code == ILLEGAL_GENERATION
                        || code == COORDINATOR_LOAD_IN_PROGRESS)
                        && tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(ClientError::Kafka { code, .. })
                    if (code == NOT_COORDINATOR || code == COORDINATOR_NOT_AVAILABLE)
                        && tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    self.coordinator =
                        find_coordinator(&self.cluster, &self.config.group_id).await?;
                    self.forget_generation();
                }
                // The coordinator's connection dropped (it restarted, or it could not read the
                // version asked): look it up again and join on a new connection.
                Err(ClientError::Disconnected { .. }) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    self.coordinator =
                        find_coordinator(&self.cluster, &self.config.group_id).await?;
                    self.forget_generation();
                }
                // librdkafka's mock cluster answers some SyncGroups (those it fails, in the middle
                // of a rebalance) with a null assignment, which the protocol does not allow and
                // which does not decode: join again, as for a rebalance in progress.
                Err(ClientError::Frame(reason))
                    if reason.contains("SyncGroup")
                        && reason.contains("negative")
                        && tokio::time::Instant::now() < deadline =>
                {
                    tracing::debug!(%reason, "SyncGroup answer that does not decode: joining again");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(ClientError::Kafka { api, code, .. }) if code == UNKNOWN_MEMBER_ID => {
                    self.member_id.clear();
                    self.forget_generation();
                    // Out of the group: what it owned is lost, not claimed.
                    self.lost = true;
                    self.assignment.clear();
                    if tokio::time::Instant::now() >= deadline {
                        return Err(group_error(&api, &self.config.group_id, code));
                    }
                    // At once, as a new member: librdkafka's mock cluster holds a rebalance
                    // for the members it knows, and one that comes later misses it.
                }
                // A generation whose leader never sent the assignment for as long as a rebalance
                // may take: named, as the group cannot form while it leads.
                Err(ClientError::Kafka { api, code, .. })
                    if api == "SyncGroup"
                        && code == REBALANCE_IN_PROGRESS
                        && !self.leader.is_empty()
                        && !self.is_leader() =>
                {
                    return Err(ClientError::kafka(
                        "SyncGroup",
                        format!(
                            "group {:?}: after {} ms of joins the coordinator still named member {} the leader, whose assignment never came (a leader gone without the coordinator noticing, or members joining without end; upstream Tansu 0.6 keeps a leader that left during a rebalance until it restarts: there, use another --group)",
                            self.config.group_id,
                            self.config.rebalance_timeout.as_millis(),
                            self.leader
                        ),
                        code,
                    ));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// A new coordinator, or a new member id: no generation synced into that the next join's
    /// answer could repeat (see the check in [`join_and_sync`](Self::join_and_sync)).
    pub(super) fn forget_generation(&mut self) {
        self.synced_generation = -1;
        self.rebalance_signalled = false;
    }

    pub(super) async fn join_and_sync(&mut self) -> Result<(), ClientError> {
        let group = self.config.group_id.clone();
        let version = self
            .cluster
            .version_on(&self.coordinator, ApiKey::JoinGroup)?;
        if self.config.instance_id.is_some() && version < 5 {
            return Err(ClientError::Other(format!(
                "group.instance.id needs JoinGroup v5 or later (KIP-345), and the coordinator of group {group:?} at {} reads JoinGroup up to v{version}; leave group.instance.id unset",
                self.coordinator.addr()
            )));
        }
        // What every assignor offered is told (ConsumerProtocolSubscription v3, as Java and
        // librdkafka send it): the topic, the partitions owned through the join (cooperatively;
        // none when eager) and the generation they were owned in (below) — and, for
        // cooperative-sticky, that generation again in the user data, where Java's older leaders
        // read it.
        let owned = if self.assignment.is_empty() {
            Vec::new()
        } else {
            vec![
                OwnedTopic::default()
                    .with_topic(topic_name(&self.config.topic))
                    .with_partitions(self.assignment.clone()),
            ]
        };
        // The generation last joined where something is owned through the join (cooperatively),
        // as Java sends it; none (-1, Java's NO_GENERATION) where nothing is (eager, new or lost).
        // An eager member's rejoin then offers the very metadata it offered before, so a
        // coordinator that starts a new generation for changed metadata (Tansu 0.6) does not
        // start one at each retry. librdkafka's mock cluster never reads the metadata
        // (docs/PERFORMANCE.md, "stop 61").
        let generation = if owned.is_empty() {
            -1
        } else {
            self.generation_id
        };
        let mut subscriptions = Vec::new();
        for a in self.offered() {
            let body = ConsumerProtocolSubscription::default()
                .with_topics(vec![str_bytes(&self.config.topic)])
                .with_owned_partitions(owned.clone())
                .with_generation_id(generation)
                .with_user_data(
                    a.is_cooperative()
                        .then(|| Bytes::copy_from_slice(&generation.to_be_bytes())),
                );
            subscriptions.push((a.name(), encode_versioned(&body, 3)?));
        }
        let before = self.assignment.clone();
        let mut response: JoinGroupResponse;
        let mut rounds = 0;
        let joining = tokio::time::Instant::now();
        loop {
            rounds += 1;
            tracing::debug!(group = %group, member = %self.member_id, version, owned = ?self.assignment, "JoinGroup sent");
            let request = JoinGroupRequest::default()
                .with_group_id(GroupId(str_bytes(&group)))
                .with_session_timeout_ms(self.config.session_timeout.as_millis() as i32)
                .with_rebalance_timeout_ms(self.config.rebalance_timeout.as_millis() as i32)
                .with_member_id(str_bytes(&self.member_id))
                .with_group_instance_id(self.instance_at(version, 5))
                .with_protocol_type(str_bytes("consumer"))
                .with_protocols(
                    subscriptions
                        .iter()
                        .map(|(name, metadata)| {
                            JoinGroupRequestProtocol::default()
                                .with_name(str_bytes(name))
                                .with_metadata(metadata.clone())
                        })
                        .collect(),
                );
            // The coordinator may hold a JoinGroup for up to the rebalance timeout (upstream Tansu
            // holds it for half the session timeout); Java allows that plus 5 s.
            let patience = self
                .cluster
                .config()
                .request_timeout
                .max(self.config.rebalance_timeout + Duration::from_secs(5));
            response = match self
                .coordinator
                .request_within(ApiKey::JoinGroup, version, &request, patience)
                .await
            {
                Ok(r) => r,
                Err(e @ ClientError::Disconnected { .. }) => {
                    // A broker that cannot read the flexible version it announced drops the
                    // connection: the next attempt asks the whole join (JoinGroup and SyncGroup,
                    // which such a coordinator reads alike) at the versions it reads.
                    if self.cluster.avoid_flexible(ApiKey::JoinGroup, version) {
                        let sync = self
                            .cluster
                            .version_on(&self.coordinator, ApiKey::SyncGroup);
                        if let Ok(v) = sync {
                            self.cluster.avoid_flexible(ApiKey::SyncGroup, v);
                        }
                    }
                    return Err(e);
                }
                Err(e) => return Err(e),
            };
            // KIP-394: a first join may be answered with a member id to join again with.
            if response.error_code == MEMBER_ID_REQUIRED && rounds < 3 {
                self.member_id = response.member_id.to_string();
                continue;
            }
            break;
        }
        if response.error_code == INCONSISTENT_GROUP_PROTOCOL {
            let offered: Vec<&str> = self.offered().iter().map(|a| a.name()).collect();
            return Err(ClientError::kafka(
                "JoinGroup",
                format!(
                    "group {group:?} (its coordinator takes none of partition.assignment.strategy={}; the group's other members, or the protocol it keeps, use another)",
                    offered.join(",")
                ),
                response.error_code,
            ));
        }
        if response.error_code == FENCED_INSTANCE_ID {
            return Err(self.fenced("JoinGroup"));
        }
        if response.error_code != 0 {
            return Err(group_error("JoinGroup", &group, response.error_code));
        }
        // The coordinator asked for a rebalance, yet answered the join with the generation this
        // member already synced into, from the coordinator it synced with: no new generation
        // formed (Kafka answers so only a follower of a stable group, which asks for no
        // rebalance; a new coordinator or member id forgets the generation, as a coordinator
        // that moved may answer a follower so). Tansu 0.6 does this when a
        // member's session ran out: the heartbeat that noticed it removed the member but kept
        // the group formed, with its old leader and old assignments, so every SyncGroup would
        // hand back the old assignment and the gone member's partitions would have no reader
        // for ever. Leaving (which starts a new generation there, without the gone leader) and
        // joining again as a new member forms the group anew. Not for a static member, whose
        // rejoin keeps its generation there by design (KIP-345).
        if self.rebalance_signalled
            && self.config.instance_id.is_none()
            && response.generation_id >= 0
            && response.generation_id == self.synced_generation
        {
            tracing::debug!(group = %group, member = %self.member_id, generation = response.generation_id, leader = %response.leader, "JoinGroup answered the generation already synced after a rebalance was asked for: leaving, to join again as a new member");
            self.rebalance_signalled = false;
            self.synced_generation = -1;
            self.member_id = response.member_id.to_string();
            if let Err(e) = self.leave().await {
                tracing::debug!(group = %group, member = %self.member_id, error = %e, "LeaveGroup before joining again as a new member failed: the coordinator drops the old id after its session");
            }
            self.member_id.clear();
            self.lost = true;
            self.assignment.clear();
            // Retried as a rebalance in progress, for as long as the rebalance timeout allows.
            return Err(ClientError::kafka(
                "JoinGroup",
                format!(
                    "group {group:?}: the coordinator asked for a rebalance but answered the join with generation {} again, which this member had already synced into; it left to join as a new member",
                    response.generation_id
                ),
                REBALANCE_IN_PROGRESS,
            ));
        }
        self.member_id = response.member_id.to_string();
        self.generation_id = response.generation_id;
        let joined = joining.elapsed();
        tracing::debug!(group = %group, member = %self.member_id, generation = self.generation_id, leader = %response.leader, members = response.members.len(), took_ms = joined.as_millis() as u64, "JoinGroup answered");
        self.leader = response.leader.to_string();
        let is_leader = response.leader.as_str() == self.member_id;
        let assignments = if is_leader && !response.skip_assignment {
            self.lead(&response).await?
        } else {
            Vec::new()
        };
        let sync_version = self
            .cluster
            .version_on(&self.coordinator, ApiKey::SyncGroup)?;
        let mut request = SyncGroupRequest::default()
            .with_group_id(GroupId(str_bytes(&group)))
            .with_generation_id(self.generation_id)
            .with_member_id(str_bytes(&self.member_id))
            .with_group_instance_id(self.instance_at(sync_version, 3))
            .with_assignments(assignments);
        if sync_version >= 5 {
            request = request
                .with_protocol_type(Some(str_bytes("consumer")))
                .with_protocol_name(
                    response
                        .protocol_name
                        .clone()
                        .or(Some(str_bytes(self.offered()[0].name()))),
                );
        }
        let syncing = tokio::time::Instant::now();
        let sync: SyncGroupResponse = match self
            .coordinator
            .request_at(ApiKey::SyncGroup, sync_version, &request)
            .await
        {
            Ok(r) => r,
            Err(e @ ClientError::Disconnected { .. }) => {
                if self.cluster.avoid_flexible(ApiKey::SyncGroup, sync_version) {
                    // Joined but not synced: leave, or the coordinator would wait a whole
                    // session for this member before the next join completes.
                    if let Ok(c) = find_coordinator(&self.cluster, &self.config.group_id).await {
                        self.coordinator = c;
                        let _ = self.leave().await;
                    }
                    self.member_id.clear();
                }
                return Err(e);
            }
            Err(e) => return Err(e),
        };
        if sync.error_code == FENCED_INSTANCE_ID {
            return Err(self.fenced("SyncGroup"));
        }
        if sync.error_code != 0 {
            return Err(group_error("SyncGroup", &group, sync.error_code));
        }
        self.assignment = decode_assignment(&sync.assignment, &self.config.topic)?;
        tracing::debug!(group = %group, member = %self.member_id, generation = self.generation_id, assignment = ?self.assignment, "SyncGroup answered");
        self.phases = (joined, syncing.elapsed());
        // KIP-429: partitions taken away are given up now, and the member joins again at once.
        self.second_round =
            self.cooperative() && before.iter().any(|p| !self.assignment.contains(p));
        self.lost = false;
        self.synced_generation = self.generation_id;
        self.rebalance_signalled = false;
        Ok(())
    }

    /// One Heartbeat: whether the member is still in the current generation (the consumer
    /// protocol: whether its assignment stays as it is).
    pub async fn heartbeat(&mut self) -> Result<Membership, ClientError> {
        if self.config.protocol == GroupProtocol::Consumer {
            return self.heartbeat_kip848().await;
        }
        if self.second_round {
            return Ok(Membership::RejoinNeeded);
        }
        let version = self
            .cluster
            .version_on(&self.coordinator, ApiKey::Heartbeat)?;
        let request = HeartbeatRequest::default()
            .with_group_id(GroupId(str_bytes(&self.config.group_id)))
            .with_generation_id(self.generation_id)
            .with_member_id(str_bytes(&self.member_id))
            .with_group_instance_id(self.instance_at(version, 3));
        let response: HeartbeatResponse = self
            .coordinator
            .request_at(ApiKey::Heartbeat, version, &request)
            .await?;
        // Out of the group (its generation or its id gone): what it owned is lost.
        self.lost |= matches!(
            response.error_code,
            ILLEGAL_GENERATION | UNKNOWN_MEMBER_ID | FENCED_INSTANCE_ID
        );
        self.rebalance_signalled |= response.error_code == REBALANCE_IN_PROGRESS;
        tracing::debug!(group = %self.config.group_id, member = %self.member_id, generation = self.generation_id, error_code = response.error_code, "Heartbeat answered");
        membership("Heartbeat", &self.config.group_id, response.error_code)
    }

    /// Who commits for this member, as the coordinator knows it now (its connection, id and
    /// generation or member epoch): what an OffsetCommit is built from, valid until the next join.
    pub fn commit_target(&self) -> Result<CommitTarget, ClientError> {
        let version = self
            .cluster
            .version_on(&self.coordinator, ApiKey::OffsetCommit)?;
        Ok(CommitTarget {
            connection: self.coordinator.clone(),
            version,
            group: self.config.group_id.clone(),
            member_id: self.member_id.clone(),
            generation: self.generation_id,
            instance_id: self.instance_at(version, 7).map(|s| s.to_string()),
        })
    }

    /// The request that commits `offsets` (partition → next offset to read) for this member, and the
    /// connection to send it on: [`commit`](Self::commit) awaits it; an asynchronous committer may
    /// send it from a task of its own with [`send_commit`].
    pub fn commit_request(
        &self,
        topic: &TopicLayout,
        offsets: &BTreeMap<i32, i64>,
    ) -> Result<CommitRequest, ClientError> {
        Ok(self.commit_target()?.request(topic, offsets))
    }

    /// OffsetCommit, awaited.
    pub async fn commit(
        &self,
        topic: &TopicLayout,
        offsets: &BTreeMap<i32, i64>,
    ) -> Result<Membership, ClientError> {
        send_commit(self.commit_request(topic, offsets)?).await
    }

    /// The group's committed offsets for `partitions` of `topic` (OffsetFetch); a partition with
    /// nothing committed is absent.
    pub async fn committed_offsets(
        &self,
        topic: &TopicLayout,
        partitions: &[i32],
    ) -> Result<BTreeMap<i32, i64>, ClientError> {
        offset_fetch(
            &self.cluster,
            &self.coordinator,
            &self.config.group_id,
            topic,
            partitions,
        )
        .await
    }

    /// The member closes, as Java's consumer does: a dynamic member leaves
    /// ([`leave`](Self::leave)); a static one (`group.instance.id`) stays in the group for its
    /// session, so that a restart within it takes its place without a rebalance (the consumer
    /// protocol: a heartbeat at epoch -2, KIP-848's temporary leave; the classic protocol: no
    /// request at all).
    pub async fn close(&self) -> Result<(), ClientError> {
        match (self.is_static(), self.config.protocol) {
            (false, _) => self.leave().await,
            (true, GroupProtocol::Classic) => Ok(()),
            (true, GroupProtocol::Consumer) => self.leave_kip848(-2).await,
        }
    }

    /// Whether the member is static (`group.instance.id`, KIP-345).
    pub fn is_static(&self) -> bool {
        self.config.instance_id.is_some()
    }

    /// The member's `group.instance.id` where the request's `version` carries it (from `since`).
    pub(super) fn instance_at(&self, version: i16, since: i16) -> Option<StrBytes> {
        (version >= since)
            .then(|| self.config.instance_id.as_deref().map(str_bytes))
            .flatten()
    }

    /// FENCED_INSTANCE_ID: another member has joined with this member's `group.instance.id`.
    pub(super) fn fenced(&self, api: &str) -> ClientError {
        ClientError::Other(format!(
            "{api}: group.instance.id {:?} of group {:?} was taken by another member (FENCED_INSTANCE_ID): two consumers share one static id",
            self.config.instance_id.as_deref().unwrap_or_default(),
            self.config.group_id
        ))
    }

    /// LeaveGroup (the consumer protocol: a heartbeat at epoch -1), so that the coordinator does
    /// not wait out the session timeout — a static member too (as Java's `close` with
    /// `GroupMembershipOperation.LEAVE_GROUP` does, KIP-1092).
    pub async fn leave(&self) -> Result<(), ClientError> {
        if self.config.protocol == GroupProtocol::Consumer {
            return self.leave_kip848(-1).await;
        }
        // Never given a member id (its first join abandoned): nothing to leave.
        if self.member_id.is_empty() && self.config.instance_id.is_none() {
            return Ok(());
        }
        let mut version = self
            .cluster
            .version_on(&self.coordinator, ApiKey::LeaveGroup)?;
        loop {
            match self.leave_at(version).await? {
                Some(v) => version = v,
                None => return Ok(()),
            }
        }
    }

    /// The consumer protocol's leave: a heartbeat at `epoch` (-1 leaves, -2 leaves for now, a
    /// static member's close).
    pub(super) async fn leave_kip848(&self, epoch: i32) -> Result<(), ClientError> {
        let request = self.kip848_request(epoch, false);
        let response = self.send_kip848(&request).await?;
        match response.error_code {
            0 | UNKNOWN_MEMBER_ID | FENCED_MEMBER_EPOCH => Ok(()),
            code => Err(group_error(
                "ConsumerGroupHeartbeat",
                &self.config.group_id,
                code,
            )),
        }
    }

    /// One LeaveGroup at `version`; `Some(v)`: ask again at `v`, the answer having shown that
    /// the coordinator reads only older versions.
    pub(super) async fn leave_at(&self, version: i16) -> Result<Option<i16>, ClientError> {
        let mut request =
            LeaveGroupRequest::default().with_group_id(GroupId(str_bytes(&self.config.group_id)));
        request = if version >= 3 {
            request.with_members(vec![
                MemberIdentity::default()
                    .with_member_id(str_bytes(&self.member_id))
                    .with_group_instance_id(self.config.instance_id.as_deref().map(str_bytes))
                    .with_reason(if version >= 5 {
                        Some(str_bytes("kbench run finished"))
                    } else {
                        None
                    }),
            ])
        } else {
            request.with_member_id(str_bytes(&self.member_id))
        };
        let response: LeaveGroupResponse = match self
            .coordinator
            .request_at(ApiKey::LeaveGroup, version, &request)
            .await
        {
            Ok(r) => r,
            // An answer that does not decode at v3+: librdkafka's mock cluster, which reads
            // every LeaveGroup as v0-2 (so finds no member in a batched one, and leaves it in the
            // group until its session ends) and answers without the members array. Asked again
            // at v2, counted as a protocol anomaly.
            Err(ClientError::Frame(reason)) if version >= 3 => {
                self.cluster.cap_at(
                    ApiKey::LeaveGroup,
                    version,
                    2,
                    &format!("response that does not decode ({reason})"),
                );
                return Ok(Some(2));
            }
            Err(ClientError::Frame(reason)) => {
                self.cluster.note_anomaly(format!(
                    "LeaveGroup v{version} response that does not decode ({reason})"
                ));
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let code = response
            .members
            .iter()
            .map(|m| m.error_code)
            .find(|c| *c != 0)
            .unwrap_or(response.error_code);
        if code != 0 && code != UNKNOWN_MEMBER_ID {
            return Err(group_error("LeaveGroup", &self.config.group_id, code));
        }
        Ok(None)
    }
}
