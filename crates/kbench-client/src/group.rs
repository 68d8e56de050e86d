//! The classic consumer-group conversation (KIP-848 is not spoken: Tansu 0.6 has only the classic
//! protocol): FindCoordinator, JoinGroup (with the MEMBER_ID_REQUIRED round trip of KIP-394),
//! SyncGroup — with kbench, when it leads, running the assignor the coordinator chose from those
//! `partition.assignment.strategy` offered ([`crate::assignor`]: range, roundrobin) over every
//! member's subscription —, Heartbeat, OffsetCommit and LeaveGroup; ListOffsets for
//! `auto.offset.reset=latest`.
//!
//! kbench's own consumer is one member reading one topic; the other members of its group may be
//! anyone's (a librdkafka or Java consumer), subscribed to any topics.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedPartition;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    BrokerId, ConsumerProtocolAssignment, ConsumerProtocolSubscription, FindCoordinatorRequest,
    FindCoordinatorResponse, GroupId, HeartbeatRequest, HeartbeatResponse, JoinGroupRequest,
    JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse, ListOffsetsRequest,
    ListOffsetsResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest,
    OffsetFetchResponse, SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kbench_wire::ApiKey;

use crate::assignor::{Assignment, Assignor, Member};
use crate::cluster::{Cluster, TopicLayout, topic_name};
use crate::connection::Connection;
use crate::error::ClientError;

const MEMBER_ID_REQUIRED: i16 = 79;
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const NOT_COORDINATOR: i16 = 16;
const REBALANCE_IN_PROGRESS: i16 = 27;
const ILLEGAL_GENERATION: i16 = 22;
const UNKNOWN_MEMBER_ID: i16 = 25;
const FENCED_INSTANCE_ID: i16 = 82;
const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;

/// How a group member is configured.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    pub group_id: String,
    pub topic: String,
    /// `session.timeout.ms`.
    pub session_timeout: Duration,
    /// `max.poll.interval.ms`, sent as the rebalance timeout.
    pub rebalance_timeout: Duration,
    /// `partition.assignment.strategy`: offered in this order; the one the coordinator picks is
    /// run when this member leads.
    pub assignors: Vec<Assignor>,
}

/// What a heartbeat or a commit learned about membership.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Membership {
    /// Still a member of the current generation.
    Stable,
    /// The coordinator asks for a rejoin (a rebalance started, or this generation/member is gone).
    RejoinNeeded,
}

/// A joined member of a consumer group.
pub struct GroupMember {
    cluster: Arc<Cluster>,
    config: GroupConfig,
    coordinator: Arc<Connection>,
    member_id: String,
    generation_id: i32,
    /// The partitions of `config.topic` this member was assigned.
    assignment: Vec<i32>,
    /// The last join's phases: how long the coordinator held its JoinGroup (every round of it,
    /// KIP-394's included), and its SyncGroup.
    phases: (Duration, Duration),
}

impl std::fmt::Debug for GroupMember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupMember")
            .field("group_id", &self.config.group_id)
            .field("member_id", &self.member_id)
            .field("generation_id", &self.generation_id)
            .finish()
    }
}

fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn group_error(api: &str, group: &str, code: i16) -> ClientError {
    ClientError::kafka(api, format!("group {group:?}"), code)
}

impl GroupMember {
    /// Find the coordinator, join the group and sync: on return the member has its partitions.
    pub async fn join(
        cluster: Arc<Cluster>,
        config: GroupConfig,
    ) -> Result<GroupMember, ClientError> {
        let coordinator = find_coordinator(&cluster, &config.group_id).await?;
        let mut member = GroupMember {
            cluster,
            config,
            coordinator,
            member_id: String::new(),
            generation_id: -1,
            assignment: Vec::new(),
            phases: (Duration::ZERO, Duration::ZERO),
        };
        member.rejoin().await?;
        Ok(member)
    }

    pub fn member_id(&self) -> &str {
        &self.member_id
    }

    pub fn generation_id(&self) -> i32 {
        self.generation_id
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
    fn offered(&self) -> &[Assignor] {
        if self.config.assignors.is_empty() {
            &[Assignor::Range]
        } else {
            &self.config.assignors
        }
    }

    /// As the group's leader: every member's subscription read, the partition counts of the
    /// topics subscribed to (a topic the cluster does not know is left out, as Java leaves it),
    /// and the assignor the coordinator chose run over them.
    async fn lead(
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
            members.push(Member {
                member_id: m.member_id.to_string(),
                instance_id: m.group_instance_id.as_ref().map(|i| i.to_string()),
                topics: decode_subscription(&m.metadata, m.member_id.as_str())?,
            });
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
        let deadline = tokio::time::Instant::now() + self.config.rebalance_timeout;
        loop {
            // A coordinator whose connection broke (it restarted, say) is looked up again.
            if self.coordinator.is_broken() {
                self.coordinator = find_coordinator(&self.cluster, &self.config.group_id).await?;
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
                }
                // The coordinator's connection dropped (it restarted, or it could not read the
                // version asked): look it up again and join on a new connection.
                Err(ClientError::Disconnected { .. }) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    self.coordinator =
                        find_coordinator(&self.cluster, &self.config.group_id).await?;
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
                Err(ClientError::Kafka { code, .. }) if code == UNKNOWN_MEMBER_ID => {
                    self.member_id.clear();
                    if tokio::time::Instant::now() >= deadline {
                        return Err(group_error("JoinGroup", &self.config.group_id, code));
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn join_and_sync(&mut self) -> Result<(), ClientError> {
        let group = self.config.group_id.clone();
        let version = self
            .cluster
            .version_on(&self.coordinator, ApiKey::JoinGroup)?;
        let subscription = encode_versioned(
            &ConsumerProtocolSubscription::default()
                .with_topics(vec![str_bytes(&self.config.topic)]),
            0,
        )?;
        let mut response: JoinGroupResponse;
        let mut rounds = 0;
        let joining = tokio::time::Instant::now();
        loop {
            rounds += 1;
            let request = JoinGroupRequest::default()
                .with_group_id(GroupId(str_bytes(&group)))
                .with_session_timeout_ms(self.config.session_timeout.as_millis() as i32)
                .with_rebalance_timeout_ms(self.config.rebalance_timeout.as_millis() as i32)
                .with_member_id(str_bytes(&self.member_id))
                .with_protocol_type(str_bytes("consumer"))
                .with_protocols(
                    self.offered()
                        .iter()
                        .map(|a| {
                            JoinGroupRequestProtocol::default()
                                .with_name(str_bytes(a.name()))
                                .with_metadata(subscription.clone())
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
        if response.error_code != 0 {
            return Err(group_error("JoinGroup", &group, response.error_code));
        }
        self.member_id = response.member_id.to_string();
        self.generation_id = response.generation_id;
        let joined = joining.elapsed();
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
        if sync.error_code != 0 {
            return Err(group_error("SyncGroup", &group, sync.error_code));
        }
        self.assignment = decode_assignment(&sync.assignment, &self.config.topic)?;
        self.phases = (joined, syncing.elapsed());
        Ok(())
    }

    /// One Heartbeat: whether the member is still in the current generation.
    pub async fn heartbeat(&self) -> Result<Membership, ClientError> {
        let version = self
            .cluster
            .version_on(&self.coordinator, ApiKey::Heartbeat)?;
        let request = HeartbeatRequest::default()
            .with_group_id(GroupId(str_bytes(&self.config.group_id)))
            .with_generation_id(self.generation_id)
            .with_member_id(str_bytes(&self.member_id));
        let response: HeartbeatResponse = self
            .coordinator
            .request_at(ApiKey::Heartbeat, version, &request)
            .await?;
        membership("Heartbeat", &self.config.group_id, response.error_code)
    }

    /// The request that commits `offsets` (partition → next offset to read) for this member, and the
    /// connection to send it on: [`commit`](Self::commit) awaits it; an asynchronous committer may
    /// send it from a task of its own with [`send_commit`].
    pub fn commit_request(
        &self,
        topic: &TopicLayout,
        offsets: &BTreeMap<i32, i64>,
    ) -> Result<CommitRequest, ClientError> {
        let version = self
            .cluster
            .version_on(&self.coordinator, ApiKey::OffsetCommit)?;
        let partitions = offsets
            .iter()
            .map(|(p, o)| {
                OffsetCommitRequestPartition::default()
                    .with_partition_index(*p)
                    .with_committed_offset(*o)
            })
            .collect();
        let mut t = OffsetCommitRequestTopic::default().with_partitions(partitions);
        t = if version >= 10 {
            t.with_topic_id(topic.topic_id)
        } else {
            t.with_name(topic_name(&topic.name))
        };
        let mut request = OffsetCommitRequest::default()
            .with_group_id(GroupId(str_bytes(&self.config.group_id)))
            .with_generation_id_or_member_epoch(self.generation_id)
            .with_member_id(str_bytes(&self.member_id))
            .with_topics(vec![t]);
        if (2..=4).contains(&version) {
            request = request.with_retention_time_ms(-1);
        }
        Ok(CommitRequest {
            connection: self.coordinator.clone(),
            version,
            request,
            group: self.config.group_id.clone(),
        })
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

    /// LeaveGroup, so that the coordinator does not wait out the session timeout.
    pub async fn leave(&self) -> Result<(), ClientError> {
        let version = self
            .cluster
            .version_on(&self.coordinator, ApiKey::LeaveGroup)?;
        let mut request =
            LeaveGroupRequest::default().with_group_id(GroupId(str_bytes(&self.config.group_id)));
        request = if version >= 3 {
            request.with_members(vec![
                MemberIdentity::default()
                    .with_member_id(str_bytes(&self.member_id))
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
            // The coordinator answered (the member has left), in bytes that do not decode
            // (librdkafka's mock cluster writes a null members array at v4): counted as a
            // protocol anomaly, not a failed leave.
            Err(ClientError::Frame(reason)) => {
                self.cluster.note_anomaly(format!(
                    "LeaveGroup v{version} response that does not decode ({reason})"
                ));
                return Ok(());
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
        Ok(())
    }
}

/// An OffsetCommit ready to send; see [`GroupMember::commit_request`].
pub struct CommitRequest {
    connection: Arc<Connection>,
    version: i16,
    request: OffsetCommitRequest,
    group: String,
}

/// Send an OffsetCommit and check every partition's error code.
pub async fn send_commit(commit: CommitRequest) -> Result<Membership, ClientError> {
    let response: OffsetCommitResponse = commit
        .connection
        .request_at(ApiKey::OffsetCommit, commit.version, &commit.request)
        .await?;
    let code = response
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| p.error_code)
        .find(|c| *c != 0)
        .unwrap_or(0);
    membership("OffsetCommit", &commit.group, code)
}

fn membership(api: &str, group: &str, code: i16) -> Result<Membership, ClientError> {
    match code {
        0 => Ok(Membership::Stable),
        REBALANCE_IN_PROGRESS | ILLEGAL_GENERATION | UNKNOWN_MEMBER_ID | FENCED_INSTANCE_ID => {
            Ok(Membership::RejoinNeeded)
        }
        code => Err(group_error(api, group, code)),
    }
}

/// `group_id`'s committed offsets for `partitions` of `topic`, asked of its `coordinator`
/// (OffsetFetch); a partition with nothing committed is absent.
async fn offset_fetch(
    cluster: &Cluster,
    coordinator: &Connection,
    group_id: &str,
    topic: &TopicLayout,
    partitions: &[i32],
) -> Result<BTreeMap<i32, i64>, ClientError> {
    let version = cluster.version_on(coordinator, ApiKey::OffsetFetch)?;
    let group = GroupId(str_bytes(group_id));
    let request = if version >= 8 {
        OffsetFetchRequest::default().with_groups(vec![
            OffsetFetchRequestGroup::default()
                .with_group_id(group)
                .with_topics(Some(vec![
                    OffsetFetchRequestTopics::default()
                        .with_name(topic_name(&topic.name))
                        .with_partition_indexes(partitions.to_vec()),
                ])),
        ])
    } else {
        OffsetFetchRequest::default()
            .with_group_id(group)
            .with_topics(Some(vec![
                OffsetFetchRequestTopic::default()
                    .with_name(topic_name(&topic.name))
                    .with_partition_indexes(partitions.to_vec()),
            ]))
    };
    let response: OffsetFetchResponse = coordinator
        .request_at(ApiKey::OffsetFetch, version, &request)
        .await?;

    let mut found: Vec<(i32, i64, i16)> = Vec::new();
    if version >= 8 {
        for g in &response.groups {
            if g.error_code != 0 {
                return Err(group_error("OffsetFetch", group_id, g.error_code));
            }
            for t in &g.topics {
                for p in &t.partitions {
                    found.push((p.partition_index, p.committed_offset, p.error_code));
                }
            }
        }
    } else {
        if response.error_code != 0 {
            return Err(group_error("OffsetFetch", group_id, response.error_code));
        }
        for t in &response.topics {
            for p in &t.partitions {
                found.push((p.partition_index, p.committed_offset, p.error_code));
            }
        }
    }
    let mut out = BTreeMap::new();
    for (partition, offset, code) in found {
        if code != 0 {
            return Err(ClientError::kafka(
                "OffsetFetch",
                format!("{}-{partition}", topic.name),
                code,
            ));
        }
        if offset >= 0 && partitions.contains(&partition) {
            out.insert(partition, offset);
        }
    }
    Ok(out)
}

/// FindCoordinator (key type group), at the version the bootstrap broker and kbench share.
async fn find_coordinator(cluster: &Cluster, group: &str) -> Result<Arc<Connection>, ClientError> {
    find_coordinator_of(cluster, group, 0).await
}

/// The coordinator of `key`: a consumer group's (`key_type` 0) or a transactional id's (1).
pub(crate) async fn find_coordinator_of(
    cluster: &Cluster,
    group: &str,
    key_type: i8,
) -> Result<Arc<Connection>, ClientError> {
    let bootstrap = cluster.control_connection().await?;
    let version = cluster.version_on(&bootstrap, ApiKey::FindCoordinator)?;
    if key_type != 0 && version < 1 {
        return Err(ClientError::Other(format!(
            "FindCoordinator v{version} cannot look up a transaction coordinator (v1 or later needed)"
        )));
    }
    let mut request = FindCoordinatorRequest::default().with_key_type(key_type);
    request = if version >= 4 {
        request.with_coordinator_keys(vec![str_bytes(group)])
    } else {
        request.with_key(str_bytes(group))
    };
    let mut attempts = 0;
    loop {
        attempts += 1;
        let response: FindCoordinatorResponse = bootstrap
            .request_at(ApiKey::FindCoordinator, version, &request)
            .await?;
        let (code, node, host, port) = if version >= 4 {
            let c = response.coordinators.first().ok_or_else(|| {
                ClientError::Other(format!("FindCoordinator for group {group:?}: empty answer"))
            })?;
            (c.error_code, c.node_id, c.host.to_string(), c.port)
        } else {
            (
                response.error_code,
                response.node_id,
                response.host.to_string(),
                response.port,
            )
        };
        if (code == COORDINATOR_NOT_AVAILABLE || code == COORDINATOR_LOAD_IN_PROGRESS)
            && attempts < 50
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        if code != 0 {
            return Err(group_error("FindCoordinator", group, code));
        }
        let BrokerId(node) = node;
        cluster.learn_broker(node, format!("{host}:{port}"));
        return cluster
            .connection_for(node, crate::cluster::Purpose::Group)
            .await;
    }
}

/// An assignment as SyncGroup carries it: one versioned `ConsumerProtocolAssignment` per member.
fn encode_assignment(
    assignment: &Assignment,
) -> Result<Vec<SyncGroupRequestAssignment>, ClientError> {
    assignment
        .iter()
        .map(|(member, topics)| {
            let body = ConsumerProtocolAssignment::default().with_assigned_partitions(
                topics
                    .iter()
                    .map(|(topic, partitions)| {
                        AssignedPartition::default()
                            .with_topic(topic_name(topic))
                            .with_partitions(partitions.clone())
                    })
                    .collect(),
            );
            Ok(SyncGroupRequestAssignment::default()
                .with_member_id(str_bytes(member))
                .with_assignment(encode_versioned(&body, 0)?))
        })
        .collect()
}

/// The topics a member's JoinGroup metadata subscribes to (ConsumerProtocolSubscription, any
/// version: a newer one is read as the newest known, as Java reads it).
fn decode_subscription(bytes: &Bytes, member: &str) -> Result<Vec<String>, ClientError> {
    let bad = |e: &dyn std::fmt::Display| {
        ClientError::Frame(format!("JoinGroup: member {member}'s subscription: {e}"))
    };
    let mut buf = bytes.clone();
    if buf.remaining() < 2 {
        return Err(bad(&"truncated"));
    }
    let version = buf.get_i16().clamp(0, 3);
    let subscription =
        ConsumerProtocolSubscription::decode(&mut buf, version).map_err(|e| bad(&e))?;
    Ok(subscription
        .topics
        .into_iter()
        .map(|t| t.to_string())
        .collect())
}

/// The consumer protocol's embedded structs: an i16 version, then the struct at that version.
fn encode_versioned<T: Encodable>(value: &T, version: i16) -> Result<Bytes, ClientError> {
    let mut buf = BytesMut::new();
    buf.put_i16(version);
    value
        .encode(&mut buf, version)
        .map_err(|e| ClientError::Frame(format!("consumer protocol encoding: {e}")))?;
    Ok(buf.freeze())
}

fn decode_assignment(bytes: &Bytes, topic: &str) -> Result<Vec<i32>, ClientError> {
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    let mut buf = bytes.clone();
    if buf.remaining() < 2 {
        return Err(ClientError::Frame("SyncGroup assignment: truncated".into()));
    }
    let version = buf.get_i16().clamp(0, 3);
    let assignment = ConsumerProtocolAssignment::decode(&mut buf, version)
        .map_err(|e| ClientError::Frame(format!("SyncGroup assignment: {e}")))?;
    let mut partitions: Vec<i32> = assignment
        .assigned_partitions
        .into_iter()
        .filter(|t| t.topic.0.as_str() == topic)
        .flat_map(|t| t.partitions)
        .collect();
    partitions.sort_unstable();
    Ok(partitions)
}

impl Cluster {
    /// The earliest offset (the log start) of each of `partitions`: where a consumer with
    /// `auto.offset.reset=earliest` starts.
    pub async fn earliest_offsets(
        &self,
        topic: &TopicLayout,
        partitions: &[i32],
    ) -> Result<BTreeMap<i32, i64>, ClientError> {
        self.list_offsets(topic, partitions, -2).await
    }

    /// ListOffsets at `timestamp` (-1 latest, -2 earliest) for each of `partitions`.
    async fn list_offsets(
        &self,
        topic: &TopicLayout,
        partitions: &[i32],
        timestamp: i64,
    ) -> Result<BTreeMap<i32, i64>, ClientError> {
        let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
        for p in partitions {
            let leader = topic.leader(*p).ok_or_else(|| {
                ClientError::kafka("ListOffsets", format!("{}-{p}", topic.name), 5)
            })?;
            by_leader.entry(leader).or_default().push(*p);
        }
        let mut out = BTreeMap::new();
        for (leader, parts) in by_leader {
            let conn = self.connection(leader).await?;
            let version = self.version_on(&conn, ApiKey::ListOffsets)?;
            let request = ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(vec![
                    ListOffsetsTopic::default()
                        .with_name(topic_name(&topic.name))
                        .with_partitions(
                            parts
                                .iter()
                                .map(|p| {
                                    ListOffsetsPartition::default()
                                        .with_partition_index(*p)
                                        .with_timestamp(timestamp)
                                })
                                .collect(),
                        ),
                ]);
            let response: ListOffsetsResponse = conn
                .request_at(ApiKey::ListOffsets, version, &request)
                .await?;
            for t in response.topics {
                for p in t.partitions {
                    if p.error_code != 0 {
                        return Err(ClientError::kafka(
                            "ListOffsets",
                            format!("{}-{}", topic.name, p.partition_index),
                            p.error_code,
                        ));
                    }
                    out.insert(p.partition_index, p.offset);
                }
            }
        }
        for p in partitions {
            if !out.contains_key(p) {
                return Err(ClientError::Other(format!(
                    "ListOffsets did not answer for {}-{p}",
                    topic.name
                )));
            }
        }
        Ok(out)
    }

    /// `group`'s committed offsets for `partitions` of `topic`, asked as a tool asks (no
    /// membership: its coordinator found, then OffsetFetch); a partition with nothing committed is
    /// absent. kafka-consumer-groups' `--describe` reads a group's lag so.
    pub async fn group_offsets(
        &self,
        group: &str,
        topic: &TopicLayout,
        partitions: &[i32],
    ) -> Result<BTreeMap<i32, i64>, ClientError> {
        let coordinator = find_coordinator(self, group).await?;
        offset_fetch(self, &coordinator, group, topic, partitions).await
    }

    /// The latest offset (the next offset to be written: the high watermark) of each of
    /// `partitions`: where a consumer with `auto.offset.reset=latest` starts.
    pub async fn latest_offsets(
        &self,
        topic: &TopicLayout,
        partitions: &[i32],
    ) -> Result<BTreeMap<i32, i64>, ClientError> {
        let mut out = self.list_offsets(topic, partitions, -1).await?;
        // "Latest" is the high watermark. Some brokers answer ListOffsets with less: Tansu 0.6 gives
        // the base offset of the newest batch + 1, inside that batch when it holds several records.
        // A Fetch from there reports the high watermark; the higher of the two is the end.
        let asked: Vec<(i32, i64)> = out.iter().map(|(p, o)| (*p, *o)).collect();
        for (p, fetched) in self.fetch_partitions(topic, &asked, 1, 1, 10).await? {
            if let Some(o) = out.get_mut(&p) {
                *o = (*o).max(fetched.high_watermark);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_assignment_goes_through_sync_group_and_back() {
        let members = [
            Member::new("b", &["t"]),
            Member::new("a", &["t", "other"]),
            Member::new("c", &["t"]),
        ];
        let counts = BTreeMap::from([("t".to_string(), 8), ("other".to_string(), 2)]);
        let out = encode_assignment(&Assignor::Range.assign(&members, &counts)).unwrap();
        let mut seen = Vec::new();
        for a in &out {
            seen.extend(decode_assignment(&a.assignment, "t").unwrap());
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..8).collect::<Vec<_>>());
        // Sorted member order: "a" gets the first (larger) share, and the other topic too.
        assert_eq!(out[0].member_id.as_str(), "a");
        assert_eq!(
            decode_assignment(&out[0].assignment, "t").unwrap(),
            vec![0, 1, 2]
        );
        assert_eq!(
            decode_assignment(&out[0].assignment, "other").unwrap(),
            vec![0, 1]
        );
    }

    #[test]
    fn subscriptions_are_read_at_any_version() {
        for version in [0, 1, 3] {
            let bytes = encode_versioned(
                &ConsumerProtocolSubscription::default()
                    .with_topics(vec![str_bytes("t1"), str_bytes("t2")]),
                version,
            )
            .unwrap();
            assert_eq!(decode_subscription(&bytes, "m").unwrap(), ["t1", "t2"]);
        }
        let err = decode_subscription(&Bytes::from_static(&[0]), "m").unwrap_err();
        assert!(err.to_string().contains("member m's subscription"), "{err}");
    }

    #[test]
    fn an_empty_or_short_assignment_reads_as_nothing_or_fails() {
        assert!(decode_assignment(&Bytes::new(), "t").unwrap().is_empty());
        assert!(decode_assignment(&Bytes::from_static(&[0]), "t").is_err());
    }
}
