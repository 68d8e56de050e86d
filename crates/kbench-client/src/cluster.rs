//! The cluster as kbench sees it: a bootstrap connection, the brokers and partition leaders learned
//! from Metadata, one pipelined connection per broker (replaced when it breaks), and the API versions
//! actually used, recorded for every result.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    CreateTopicsRequest, CreateTopicsResponse, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kbench_wire::{ApiKey, Negotiated, Pins, api_name};

use crate::connection::{ConnectOptions, Connection};
use crate::error::ClientError;

/// How to reach and talk to the cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterConfig {
    /// `host:port` addresses to bootstrap from, tried in order.
    pub bootstrap: Vec<String>,
    pub client_id: String,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    pub max_in_flight: usize,
    pub pins: Pins,
    /// TLS for every connection (`security.protocol` SSL or SASL_SSL); none for plaintext.
    pub tls: Option<std::sync::Arc<crate::Tls>>,
    /// `security.protocol`, for results.
    pub security_protocol: crate::SecurityProtocol,
    /// SASL for every connection (`security.protocol` SASL_PLAINTEXT or SASL_SSL).
    pub sasl: Option<std::sync::Arc<crate::Sasl>>,
}

/// APIs held below a version the brokers announced but could not take (see
/// [`Cluster::avoid_flexible`]), per cluster.
#[derive(Debug, Default)]
struct LearnedCaps(Mutex<std::collections::BTreeMap<i16, i16>>);

impl LearnedCaps {
    fn get(&self, api: ApiKey) -> Option<i16> {
        self.0
            .lock()
            .expect("caps lock")
            .get(&(api as i16))
            .copied()
    }

    /// Hold `api` at `max`; `false` when it was held there or lower already.
    fn cap(&self, api: ApiKey, max: i16) -> bool {
        let mut caps = self.0.lock().expect("caps lock");
        if caps.get(&(api as i16)).is_some_and(|c| *c <= max) {
            return false;
        }
        caps.insert(api as i16, max);
        true
    }
}

impl ClusterConfig {
    /// Kafka's client defaults (see [`ConnectionSettings`](crate::ConnectionSettings)) towards
    /// `bootstrap`, as `client_id`, with `pins`.
    pub fn new(bootstrap: Vec<String>, client_id: &str, pins: Pins) -> ClusterConfig {
        let mut config = crate::ConnectionSettings::default().cluster_config(bootstrap, pins);
        config.client_id = client_id.to_string();
        config
    }
}

/// A partition and the broker that leads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionLeader {
    pub partition: i32,
    pub leader: i32,
}

/// What Metadata says of one topic.
#[derive(Debug, Clone)]
pub struct TopicLayout {
    pub name: String,
    /// The topic id (all zeros when the broker's Metadata version predates topic ids).
    pub topic_id: uuid::Uuid,
    pub partitions: Vec<PartitionLeader>,
}

impl TopicLayout {
    /// The leader of `partition`; `partitions` is sorted by partition, so this is a binary search
    /// (per-partition work stays O(n log n) over a topic, whatever its size).
    pub fn leader(&self, partition: i32) -> Option<i32> {
        self.partitions
            .binary_search_by_key(&partition, |p| p.partition)
            .ok()
            .map(|i| self.partitions[i].leader)
            .filter(|l| *l >= 0)
    }
}

/// A broker's connect queue: the last failed attempt, and when it failed.
type ConnectQueue = tokio::sync::Mutex<Option<(Instant, ClientError)>>;

/// What a connection to a broker carries. Each purpose has a connection of its own, as franz-go's
/// broker keeps separate connections for produce, fetch and group traffic: Kafka answers a
/// connection's requests in order, so a Fetch the broker holds for its max wait would otherwise
/// delay the Produce answers and the heartbeats queued behind it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Purpose {
    /// Produce requests, and anything not listed below.
    Produce,
    /// Fetch requests (long polls).
    Fetch,
    /// The group coordinator's conversation: JoinGroup, SyncGroup, Heartbeat, OffsetCommit,
    /// LeaveGroup, and the transaction coordinator's.
    Group,
}

/// A connected cluster.
pub struct Cluster {
    config: ClusterConfig,
    bootstrap: Arc<Connection>,
    brokers: Mutex<HashMap<i32, String>>,
    /// Never held across an await: one slow broker must not stall requests to the others.
    connections: Mutex<HashMap<(i32, Purpose), Arc<Connection>>>,
    /// One queue per broker for opening its connection: callers wait their turn (tokio's mutex is
    /// fair), so requests go out on it in the order they asked for it.
    /// The mutex holds the last failed attempt: callers that queued behind it take its error rather
    /// than each waiting out a connect time-out of its own.
    connecting: Mutex<HashMap<(i32, Purpose), Arc<ConnectQueue>>>,
    /// Every connection's writes, summed (replaced connections' too).
    write_stats: Arc<crate::connection::WriteStats>,
    negotiated: Mutex<Negotiated>,
    /// APIs held below a version the brokers announced but could not take (see
    /// [`Cluster::avoid_flexible`]).
    caps: LearnedCaps,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("bootstrap", &self.config.bootstrap)
            .finish()
    }
}

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const LEADER_NOT_AVAILABLE: i16 = 5;
const TOPIC_ALREADY_EXISTS: i16 = 36;

impl Cluster {
    /// Connect to the first bootstrap address that answers, and check every pin against it.
    pub async fn connect(config: ClusterConfig) -> Result<Cluster, ClientError> {
        if config.bootstrap.is_empty() {
            return Err(ClientError::Other(
                "--bootstrap-server: no address given".into(),
            ));
        }
        let mut failures = Vec::new();
        let mut bootstrap = None;
        let write_stats = Arc::new(crate::connection::WriteStats::default());
        for addr in &config.bootstrap {
            match Connection::connect_counted(
                addr,
                ConnectOptions::of(&config),
                write_stats.clone(),
            )
            .await
            {
                Ok(conn) => {
                    // The addresses passed over, named (librdkafka goes on to the next as quietly).
                    for (skipped, reason) in &failures {
                        tracing::warn!(
                            "bootstrap server {skipped} skipped ({reason}); connected through {addr}"
                        );
                    }
                    bootstrap = Some(conn);
                    break;
                }
                // Credentials wrong on one broker are wrong on all: said at once, never retried.
                Err(e @ ClientError::Auth { .. }) => return Err(e),
                Err(ClientError::Connect { reason, .. }) => failures.push((addr, reason)),
                Err(e) => failures.push((addr, e.to_string())),
            }
        }
        let Some(bootstrap) = bootstrap else {
            if let [(addr, reason)] = failures.as_slice() {
                return Err(ClientError::Connect {
                    addr: addr.to_string(),
                    reason: reason.clone(),
                });
            }
            let failures: Vec<String> = failures.iter().map(|(a, r)| format!("{a}: {r}")).collect();
            return Err(ClientError::Connect {
                addr: config.bootstrap.join(","),
                reason: format!("no bootstrap server answered: {}", failures.join("; ")),
            });
        };
        let caps = LearnedCaps::default();
        let cluster = Cluster {
            config,
            bootstrap: Arc::new(bootstrap),
            brokers: Mutex::new(HashMap::new()),
            connections: Mutex::new(HashMap::new()),
            connecting: Mutex::new(HashMap::new()),
            write_stats,
            negotiated: Mutex::new(Negotiated::default()),
            caps,
        };
        cluster.negotiated.lock().expect("negotiated lock").insert(
            ApiKey::ApiVersions,
            cluster.bootstrap.api_versions_version(),
        );
        for (api, _) in cluster.config.pins.iter() {
            cluster.bootstrap.version(api, &cluster.config.pins)?;
        }
        Ok(cluster)
    }

    /// The bootstrap broker's announced API version ranges.
    pub fn bootstrap_ranges(&self) -> &kbench_wire::ApiRanges {
        self.bootstrap.ranges()
    }

    /// The bootstrap connection (group coordinator lookups go through it).
    pub fn bootstrap_connection(&self) -> Arc<Connection> {
        self.bootstrap.clone()
    }

    /// Remember a broker's address (e.g. a coordinator named by FindCoordinator).
    pub fn learn_broker(&self, node_id: i32, addr: String) {
        self.brokers
            .lock()
            .expect("brokers lock")
            .entry(node_id)
            .or_insert(addr);
    }

    /// The address Metadata gave broker `node_id`, if known.
    pub fn broker_addr(&self, node_id: i32) -> Option<String> {
        self.brokers
            .lock()
            .expect("brokers lock")
            .get(&node_id)
            .cloned()
    }

    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    pub fn pins(&self) -> &Pins {
        &self.config.pins
    }

    /// Choose the version for `api` on `conn` (pin or highest common) and record it as used.
    pub fn version_on(&self, conn: &Connection, api: ApiKey) -> Result<i16, ClientError> {
        let v = match self.caps.get(api) {
            Some(cap) => {
                kbench_wire::versions::choose_within(api, conn.ranges(), &self.config.pins, cap)?
            }
            None => conn.version(api, &self.config.pins)?,
        };
        self.record_version(api, v);
        Ok(v)
    }

    /// Count a protocol anomaly (a response not quite as the protocol says), by kind.
    pub fn note_anomaly(&self, what: String) {
        self.write_stats.anomaly(what);
    }

    /// A broker closed the connection on a request of `api` at `version`, a flexible version it
    /// announced (librdkafka's mock cluster does for JoinGroup v6 and SyncGroup v4, which it reads
    /// as rigid): from now on `api` is asked at its last rigid version, as Java's and librdkafka's
    /// readers of such a broker would have to; counted as a protocol anomaly. `false` (nothing
    /// changed) when the version was not flexible, the API is pinned, or it is capped already.
    pub fn avoid_flexible(&self, api: ApiKey, version: i16) -> bool {
        if !kbench_wire::versions::is_flexible(api, version) || self.config.pins.get(api).is_some()
        {
            return false;
        }
        let Some(rigid) = kbench_wire::versions::last_rigid_version(api) else {
            return false;
        };
        if !self.cap_at(
            api,
            version,
            rigid,
            "request: the broker closed the connection",
        ) {
            return false;
        }
        tracing::warn!(
            "{} v{version}: the broker closed the connection; asking at v{rigid} from now on",
            api_name(api)
        );
        // The negotiated record keeps the lowest version used.
        true
    }

    /// A broker showed at `version` of `api` (`what` it did) that it reads only up to `max`
    /// (librdkafka's mock cluster reads every LeaveGroup as v0–2, and so finds no member in a
    /// v3+ request): from now on `api` is asked at `max`, counted as a protocol anomaly. `false`
    /// when it is pinned or capped there already.
    pub fn cap_at(&self, api: ApiKey, version: i16, max: i16, what: &str) -> bool {
        if self.config.pins.get(api).is_some() {
            return false;
        }
        if !self.caps.cap(api, max) {
            return false;
        }
        self.write_stats.anomaly(format!(
            "{} v{version} {what} (v{max} used instead)",
            api_name(api)
        ));
        true
    }

    /// The version of `api` for a request about a topic with `topic_id`: as [`version_on`]
    /// (Self::version_on), but a topic the broker gave no id (the zero UUID: some Kafka-compatible
    /// brokers never assign one) is addressed by name, so Produce and Fetch stay at v12 at most, as
    /// Java's client does.
    pub fn version_for_topic(
        &self,
        conn: &Connection,
        api: ApiKey,
        topic_id: &uuid::Uuid,
    ) -> Result<i16, ClientError> {
        if !topic_id.is_nil() {
            return self.version_on(conn, api);
        }
        let v = kbench_wire::versions::choose_by_name(api, conn.ranges(), &self.config.pins)?;
        self.record_version(api, v);
        Ok(v)
    }

    fn record_version(&self, api: ApiKey, v: i16) {
        let mut negotiated = self.negotiated.lock().expect("negotiated lock");
        if negotiated.get(api) != Some(v) {
            let mut one = Negotiated::default();
            one.insert(api, v);
            negotiated.merge(&one);
        }
    }

    /// Check, before any load, that `apis` can be used with the bootstrap broker (pins included).
    pub fn check_versions(&self, apis: &[ApiKey]) -> Result<(), ClientError> {
        for api in apis {
            self.version_on(&self.bootstrap, *api)?;
        }
        Ok(())
    }

    /// The versions used so far, per API.
    pub fn negotiated(&self) -> Negotiated {
        self.negotiated.lock().expect("negotiated lock").clone()
    }

    /// Metadata for one topic; also refreshes the broker addresses.
    /// A connection closed at the first request after ApiVersions is what a broker that wants SASL
    /// does to a client that did not authenticate: say so when SASL is off.
    fn hint_security(&self, e: ClientError) -> ClientError {
        match e {
            ClientError::Disconnected { addr, reason } if self.config.sasl.is_none() => {
                ClientError::Disconnected {
                    addr,
                    reason: format!(
                        "{reason}; if this broker requires SASL, set security.protocol=SASL_PLAINTEXT (or SASL_SSL) and sasl.mechanism with its credentials"
                    ),
                }
            }
            other => other,
        }
    }

    /// The connection for cluster-wide requests (Metadata, CreateTopics, DeleteTopics): the
    /// bootstrap connection while it works, else one to a known broker, reopened as needed (a
    /// broker that restarted under load, say).
    pub async fn control_connection(&self) -> Result<Arc<Connection>, ClientError> {
        if !self.bootstrap.is_broken() {
            return Ok(self.bootstrap.clone());
        }
        let mut nodes: Vec<i32> = self
            .brokers
            .lock()
            .expect("brokers lock")
            .keys()
            .copied()
            .collect();
        nodes.sort_unstable();
        let mut last = None;
        for node in nodes {
            match self.connection(node).await {
                Ok(c) => return Ok(c),
                Err(e) => last = Some(e),
            }
        }
        // Nothing better: the bootstrap connection's own error.
        Err(last.unwrap_or_else(|| {
            ClientError::Other("the bootstrap connection was lost and no broker is known".into())
        }))
    }

    /// Every topic the cluster describes, by name, leaving out its internal ones
    /// (`__consumer_offsets`, …: Java's `exclude.internal.topics=true`), sorted.
    pub async fn topic_names(&self) -> Result<Vec<String>, ClientError> {
        let conn = self.control_connection().await?;
        let version = self.version_on(&conn, ApiKey::Metadata)?;
        // All topics: a null list from v1 (v0 has only the empty list for it).
        let mut request = MetadataRequest::default().with_topics(if version >= 1 {
            None
        } else {
            Some(Vec::new())
        });
        if version >= 4 {
            request = request.with_allow_auto_topic_creation(false);
        }
        let response: MetadataResponse = conn
            .request_at(ApiKey::Metadata, version, &request)
            .await
            .map_err(|e| self.hint_security(e))?;
        let mut names: Vec<String> = response
            .topics
            .into_iter()
            .filter(|t| !t.is_internal && t.error_code == 0)
            .filter_map(|t| t.name.map(|n| n.0.to_string()))
            .collect();
        names.sort();
        Ok(names)
    }

    pub async fn metadata(&self, topic: &str) -> Result<(i16, TopicLayout), ClientError> {
        self.metadata_creating(topic, false).await
    }

    /// [`Cluster::metadata`]; with `auto_create`, the broker is allowed to create the topic when
    /// it does not know it (Metadata v4+'s `allow_auto_topic_creation`; before v4 a broker whose
    /// `auto.create.topics.enable` is on always may).
    async fn metadata_creating(
        &self,
        topic: &str,
        auto_create: bool,
    ) -> Result<(i16, TopicLayout), ClientError> {
        let conn = self.control_connection().await?;
        let version = self.version_on(&conn, ApiKey::Metadata)?;
        let mut request = MetadataRequest::default().with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(topic_name(topic))),
        ]));
        if version >= 4 {
            request = request.with_allow_auto_topic_creation(auto_create);
        }
        let response: MetadataResponse = conn
            .request_at(ApiKey::Metadata, version, &request)
            .await
            .map_err(|e| self.hint_security(e))?;
        {
            let mut brokers = self.brokers.lock().expect("brokers lock");
            for b in &response.brokers {
                brokers.insert(b.node_id.0, format!("{}:{}", b.host.as_str(), b.port));
            }
        }
        let t = response
            .topics
            .into_iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))
            .ok_or_else(|| {
                ClientError::Other(format!("Metadata did not describe topic {topic:?}"))
            })?;
        let mut partitions: Vec<PartitionLeader> = t
            .partitions
            .iter()
            .map(|p| PartitionLeader {
                partition: p.partition_index,
                leader: if p.error_code == 0 { p.leader_id.0 } else { -1 },
            })
            .collect();
        partitions.sort_by_key(|p| p.partition);
        let layout = TopicLayout {
            name: topic.to_string(),
            topic_id: t.topic_id,
            partitions,
        };
        let code = t.error_code;
        Ok((code, layout))
    }

    /// The topic's layout, creating the topic first when it does not exist (with CreateTopics, or
    /// on a broker that offers none by a Metadata request that lets it, see `auto_create`), and
    /// waiting until every partition has a leader.
    pub async fn ensure_topic(
        &self,
        topic: &str,
        partitions: i32,
        replication_factor: i16,
    ) -> Result<TopicLayout, ClientError> {
        self.ensure_topic_with(topic, partitions, replication_factor, &[])
            .await
    }

    /// [`Cluster::ensure_topic`], a topic created here carrying `configs` (topic configs such as
    /// `min.insync.replicas`) in its CreateTopics request; a topic that exists keeps its own.
    pub async fn ensure_topic_with(
        &self,
        topic: &str,
        partitions: i32,
        replication_factor: i16,
        configs: &[(String, String)],
    ) -> Result<TopicLayout, ClientError> {
        let (code, layout) = self.metadata(topic).await?;
        match code {
            0 if !layout.partitions.is_empty() => return self.await_leaders(topic, layout).await,
            0 | UNKNOWN_TOPIC_OR_PARTITION => {}
            code => {
                return Err(ClientError::kafka(
                    "Metadata",
                    format!("topic {topic:?}"),
                    code,
                ));
            }
        }
        if configs.is_empty() && !self.offers_create_topics().await? {
            return self.auto_create(topic).await;
        }
        self.create_topic_with(topic, partitions, replication_factor, configs)
            .await?;
        let (_, layout) = self.metadata(topic).await?;
        self.await_leaders(topic, layout).await
    }

    /// Whether the broker for cluster-wide requests offers CreateTopics at all.
    async fn offers_create_topics(&self) -> Result<bool, ClientError> {
        let conn = self.control_connection().await?;
        Ok(conn.ranges().get(ApiKey::CreateTopics).is_some())
    }

    /// A topic on a broker that offers no CreateTopics (librdkafka's mock cluster, Kafka before
    /// 0.10.1): asked for by a Metadata request that lets the broker create it, as producers did
    /// before CreateTopics. It gets the broker's own partition count and replication factor (as a
    /// topic that already exists keeps its own); a broker that does not create it is one error.
    async fn auto_create(&self, topic: &str) -> Result<TopicLayout, ClientError> {
        let (code, layout) = self.metadata_creating(topic, true).await?;
        match code {
            0 | LEADER_NOT_AVAILABLE => self.await_leaders(topic, layout).await,
            UNKNOWN_TOPIC_OR_PARTITION => Err(ClientError::Other(format!(
                "topic {topic:?} does not exist, the broker offers no CreateTopics, and it did not \
                 create the topic when Metadata allowed it (auto.create.topics.enable=false?): \
                 create it first"
            ))),
            code => Err(ClientError::kafka(
                "Metadata",
                format!("topic {topic:?}"),
                code,
            )),
        }
    }

    async fn await_leaders(
        &self,
        topic: &str,
        mut layout: TopicLayout,
    ) -> Result<TopicLayout, ClientError> {
        let deadline = Instant::now() + self.config.request_timeout;
        loop {
            if !layout.partitions.is_empty() && layout.partitions.iter().all(|p| p.leader >= 0) {
                return Ok(layout);
            }
            if Instant::now() > deadline {
                return Err(ClientError::Other(format!(
                    "topic {topic:?}: not every partition has a leader after {} ms",
                    self.config.request_timeout.as_millis()
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            layout = self.metadata(topic).await?.1;
        }
    }

    /// CreateTopics for one topic; an existing topic is not an error.
    pub async fn create_topic(
        &self,
        topic: &str,
        partitions: i32,
        replication_factor: i16,
    ) -> Result<(), ClientError> {
        self.create_topic_with(topic, partitions, replication_factor, &[])
            .await
    }

    /// CreateTopics for one topic carrying `configs`; an existing topic is not an error. A topic
    /// the broker refuses is one error naming the topic, the configs asked for, the broker's error
    /// code and its message (which names the config it refused, when it was one).
    pub async fn create_topic_with(
        &self,
        topic: &str,
        partitions: i32,
        replication_factor: i16,
        configs: &[(String, String)],
    ) -> Result<(), ClientError> {
        let conn = self.control_connection().await?;
        let version = self.version_on(&conn, ApiKey::CreateTopics)?;
        let request = create_topics_request(
            topic,
            partitions,
            replication_factor,
            configs,
            self.config.request_timeout,
        );
        let response: CreateTopicsResponse = conn
            .request_at(ApiKey::CreateTopics, version, &request)
            .await?;
        for t in response.topics {
            if t.error_code != 0 && t.error_code != TOPIC_ALREADY_EXISTS {
                let mut what = format!("topic {topic:?}");
                if !configs.is_empty() {
                    let list: Vec<String> = configs
                        .iter()
                        .map(|(k, v)| {
                            let v = if crate::config::is_secret(k) {
                                "***"
                            } else {
                                v
                            };
                            format!("{k}={v}")
                        })
                        .collect();
                    what.push_str(&format!(" with configs {}", list.join(", ")));
                }
                let mut err = ClientError::kafka("CreateTopics", what, t.error_code);
                if let (ClientError::Kafka { error, .. }, Some(msg)) = (&mut err, t.error_message) {
                    error.push_str(&format!(": {}", msg.as_str()));
                }
                return Err(err);
            }
        }
        Ok(())
    }

    /// DeleteTopics for one topic; a topic already gone is not an error.
    pub async fn delete_topic(&self, topic: &str) -> Result<(), ClientError> {
        use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
        use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse};
        let conn = self.control_connection().await?;
        let version = self.version_on(&conn, ApiKey::DeleteTopics)?;
        let mut request = DeleteTopicsRequest::default().with_timeout_ms(
            self.config
                .request_timeout
                .as_millis()
                .min(i32::MAX as u128) as i32,
        );
        request = if version >= 6 {
            request.with_topics(vec![
                DeleteTopicState::default().with_name(Some(topic_name(topic))),
            ])
        } else {
            request.with_topic_names(vec![topic_name(topic)])
        };
        let response: DeleteTopicsResponse = conn
            .request_at(ApiKey::DeleteTopics, version, &request)
            .await?;
        for r in response.responses {
            if r.error_code != 0 && r.error_code != UNKNOWN_TOPIC_OR_PARTITION {
                return Err(ClientError::kafka(
                    "DeleteTopics",
                    format!("topic {topic:?}"),
                    r.error_code,
                ));
            }
        }
        Ok(())
    }

    /// The connection to broker `node_id`, opened (or reopened, when broken) as needed. No std lock
    /// is held while connecting; callers that find no connection queue for the broker's connect
    /// lock, in order, and the first opens it: two requests that asked in order are written in
    /// order (an idempotent producer's second batch must not overtake its first — racing connects
    /// once did that, and Tansu answered OUT_OF_ORDER_SEQUENCE_NUMBER). Callers queued behind an
    /// attempt that failed take its error, rather than each waiting out a connect time-out in turn.
    pub async fn connection(&self, node_id: i32) -> Result<Arc<Connection>, ClientError> {
        self.connection_for(node_id, Purpose::Produce).await
    }

    /// As [`connection`](Self::connection), the connection to `node_id` kept for `purpose`.
    pub async fn connection_for(
        &self,
        node_id: i32,
        purpose: Purpose,
    ) -> Result<Arc<Connection>, ClientError> {
        let key = (node_id, purpose);
        if let Some(c) = self.open_connection(key) {
            return Ok(c);
        }
        let queue = self
            .connecting
            .lock()
            .expect("connecting lock")
            .entry(key)
            .or_default()
            .clone();
        let asked = Instant::now();
        let mut turn = queue.lock().await;
        if let Some(c) = self.open_connection(key) {
            return Ok(c);
        }
        if let Some((failed_at, error)) = turn.as_ref()
            && *failed_at >= asked
        {
            return Err(error.clone());
        }
        let result = self.open(key).await;
        *turn = result.as_ref().err().map(|e| (Instant::now(), e.clone()));
        result
    }

    /// Open a connection to `key`'s broker and keep it (the caller holds its connect turn).
    async fn open(&self, key: (i32, Purpose)) -> Result<Arc<Connection>, ClientError> {
        let node_id = key.0;
        let addr = self
            .brokers
            .lock()
            .expect("brokers lock")
            .get(&node_id)
            .cloned()
            .ok_or_else(|| ClientError::Other(format!("no address known for broker {node_id}")))?;
        let conn = Arc::new(
            Connection::connect_counted(
                &addr,
                ConnectOptions::of(&self.config),
                self.write_stats.clone(),
            )
            .await?,
        );
        let kept = {
            let mut conns = self.connections.lock().expect("connections lock");
            match conns.get(&key) {
                Some(c) if !c.is_broken() => c.clone(),
                _ => {
                    conns.insert(key, conn.clone());
                    conn.clone()
                }
            }
        };
        if !Arc::ptr_eq(&kept, &conn) {
            tokio::spawn(async move { conn.close(Duration::from_secs(1)).await });
        }
        Ok(kept)
    }

    /// The open, unbroken connection for `key`, if there is one.
    fn open_connection(&self, key: (i32, Purpose)) -> Option<Arc<Connection>> {
        self.connections
            .lock()
            .expect("connections lock")
            .get(&key)
            .filter(|c| !c.is_broken())
            .cloned()
    }

    /// What the connections' readers found odd (responses with bytes after their body), by kind.
    pub fn protocol_anomalies(&self) -> std::collections::BTreeMap<String, u64> {
        self.write_stats.anomalies()
    }

    /// Frames written to every broker so far, and the writes that carried them.
    pub fn write_counts(&self) -> (u64, u64) {
        self.write_stats.counts()
    }

    /// Close every connection gracefully (see [`Connection::close`]), all within `patience`.
    pub async fn close(&self, patience: Duration) {
        let conns: Vec<Arc<Connection>> = self
            .connections
            .lock()
            .expect("connections lock")
            .drain()
            .map(|(_, c)| c)
            .collect();
        let all = async {
            for c in conns.iter().chain(std::iter::once(&self.bootstrap)) {
                c.close(patience).await;
            }
        };
        let _ = tokio::time::timeout(patience, all).await;
    }

    /// Name of an API, as results and messages spell it.
    pub fn api_label(api: ApiKey) -> String {
        api_name(api)
    }
}

/// The CreateTopics request for one topic of `partitions` × `replication_factor`, carrying
/// `configs` in order (each with its value: none is sent null).
pub fn create_topics_request(
    topic: &str,
    partitions: i32,
    replication_factor: i16,
    configs: &[(String, String)],
    timeout: Duration,
) -> CreateTopicsRequest {
    use kafka_protocol::messages::create_topics_request::CreatableTopicConfig;
    let configs = configs
        .iter()
        .map(|(k, v)| {
            CreatableTopicConfig::default()
                .with_name(StrBytes::from_string(k.clone()))
                .with_value(Some(StrBytes::from_string(v.clone())))
        })
        .collect();
    CreateTopicsRequest::default()
        .with_timeout_ms(timeout.as_millis().min(i32::MAX as u128) as i32)
        .with_topics(vec![
            CreatableTopic::default()
                .with_name(topic_name(topic))
                .with_num_partitions(partitions)
                .with_replication_factor(replication_factor)
                .with_configs(configs),
        ])
}

pub(crate) fn topic_name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::{Decodable, Encodable};

    /// The request kbench sends carries every topic config, in order, on the wire at every
    /// CreateTopics version kafka-protocol encodes (v2 framing as v7 flexible one).
    #[test]
    fn a_create_topics_request_carries_the_topic_configs() {
        let configs = vec![
            ("min.insync.replicas".to_string(), "2".to_string()),
            ("retention.ms".to_string(), "60000".to_string()),
        ];
        let request = create_topics_request("t", 3, 2, &configs, Duration::from_secs(30));
        for version in [2, 4, 5, 7] {
            let mut buf = bytes::BytesMut::new();
            request.encode(&mut buf, version).unwrap();
            let back = CreateTopicsRequest::decode(&mut buf.freeze(), version).unwrap();
            let topic = &back.topics[0];
            assert_eq!(topic.name.0.as_str(), "t");
            assert_eq!((topic.num_partitions, topic.replication_factor), (3, 2));
            let sent: Vec<(String, String)> = topic
                .configs
                .iter()
                .map(|c| {
                    (
                        c.name.to_string(),
                        c.value.as_ref().map(|v| v.to_string()).unwrap_or_default(),
                    )
                })
                .collect();
            assert_eq!(sent, configs, "CreateTopics v{version}");
            assert_eq!(back.timeout_ms, 30_000);
        }
        let plain = create_topics_request("t", 1, 1, &[], Duration::from_secs(1));
        assert!(plain.topics[0].configs.is_empty());
    }
}
