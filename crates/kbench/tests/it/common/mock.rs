//! librdkafka's mock cluster (the `rdkafka` crate's `mocking`): a Kafka implementation that is not
//! Tansu's, in this test process — several brokers, leaders that move, brokers that go down and
//! come back, round-trip time added, request errors injected. kbench runs against it as a child
//! process, exactly as against a real cluster.

#![allow(dead_code)]

use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;

/// A mock cluster of `brokers` brokers (ids 1..=brokers).
pub struct Mock {
    pub cluster: MockCluster<'static, DefaultProducerContext>,
    pub bootstrap: String,
    pub brokers: i32,
}

impl Mock {
    pub fn new(brokers: i32) -> Mock {
        let cluster = MockCluster::new(brokers).expect("librdkafka mock cluster");
        let bootstrap = cluster.bootstrap_servers();
        Mock {
            cluster,
            bootstrap,
            brokers,
        }
    }

    /// This mock narrowed to Apache Kafka 1.1.0's version ranges (`kafka_1_1`): the legacy broker
    /// of tier 2, where a client negotiates Produce v5 and Fetch v7 unaided. `bootstrap` becomes
    /// the proxies that mend the mock's Produce v5 answers (`kafka_1_1::mend`).
    pub fn kafka_1_1(mut self) -> Mock {
        crate::kafka_1_1::narrow(&self.cluster).expect("narrow the mock to Kafka 1.1");
        self.bootstrap = crate::kafka_1_1::mend(&self.bootstrap);
        self
    }

    /// `topic` with `partitions`, replicated on every broker, partition p led by broker
    /// `1 + p % brokers` (leaders spread).
    pub fn topic(&self, topic: &str, partitions: i32) {
        self.cluster
            .create_topic(topic, partitions, self.brokers)
            .expect("mock topic");
        for p in 0..partitions {
            self.lead(topic, p, self.leader_of(p, 0));
        }
    }

    /// The leader of partition `p` after `moves` moves: each move hands every partition to the
    /// next broker.
    pub fn leader_of(&self, p: i32, moves: i32) -> i32 {
        1 + (p + moves) % self.brokers
    }

    pub fn lead(&self, topic: &str, partition: i32, broker: i32) {
        self.cluster
            .partition_leader(topic, partition, Some(broker))
            .expect("partition leader");
    }

    /// Move every partition's leader to the next broker (move number `moves`, from 1).
    pub fn move_leaders(&self, topic: &str, partitions: i32, moves: i32) {
        for p in 0..partitions {
            self.lead(topic, p, self.leader_of(p, moves));
        }
    }
}

/// librdkafka's mock cluster with its KIP-848 group coordinator's session timeout and heartbeat
/// interval set (`rd_kafka_mock_set_group_consumer_session_timeout_ms` and `…_heartbeat_interval_ms`,
/// which the `rdkafka` crate does not wrap; 30 s and 3 s by default). The mock is made by a client
/// of its own (`test.mock.num.brokers`), whose handle gives the mock's pointer.
pub struct Kip848Mock {
    /// Owns the mock cluster: it ends with this client.
    _client: rdkafka::producer::BaseProducer,
    cluster: *mut rdkafka::bindings::rd_kafka_mock_cluster_t,
    pub bootstrap: String,
    pub brokers: i32,
}

unsafe extern "C" {
    fn rd_kafka_mock_set_group_consumer_session_timeout_ms(
        mcluster: *mut rdkafka::bindings::rd_kafka_mock_cluster_t,
        group_consumer_session_timeout_ms: std::ffi::c_int,
    );
    fn rd_kafka_mock_set_group_consumer_heartbeat_interval_ms(
        mcluster: *mut rdkafka::bindings::rd_kafka_mock_cluster_t,
        group_consumer_heartbeat_interval_ms: std::ffi::c_int,
    );
}

impl Kip848Mock {
    pub fn new(brokers: i32, session_ms: i32, heartbeat_ms: i32) -> Kip848Mock {
        use rdkafka::producer::Producer as _;
        let client: rdkafka::producer::BaseProducer = rdkafka::ClientConfig::new()
            .set("test.mock.num.brokers", brokers.to_string())
            .create()
            .expect("a client with a mock cluster");
        // SAFETY: the handle is the live client's; the mock it returns lives as long as the
        // client, which this struct owns.
        let cluster = unsafe {
            rdkafka::bindings::rd_kafka_handle_mock_cluster(client.client().native_ptr())
        };
        assert!(!cluster.is_null(), "the client made no mock cluster");
        // SAFETY: `cluster` is the live mock; both setters only store the value for groups made
        // after them.
        let bootstrap = unsafe {
            rd_kafka_mock_set_group_consumer_session_timeout_ms(cluster, session_ms);
            rd_kafka_mock_set_group_consumer_heartbeat_interval_ms(cluster, heartbeat_ms);
            std::ffi::CStr::from_ptr(rdkafka::bindings::rd_kafka_mock_cluster_bootstraps(cluster))
                .to_string_lossy()
                .into_owned()
        };
        Kip848Mock {
            _client: client,
            cluster,
            bootstrap,
            brokers,
        }
    }

    /// Move every partition's leader to the next broker (move number `moves`, from 1), as
    /// [`Mock::move_leaders`] does.
    pub fn move_leaders(&self, topic: &str, partitions: i32, moves: i32) {
        let name = std::ffi::CString::new(topic).unwrap();
        for p in 0..partitions {
            // SAFETY: the live mock, and a NUL-terminated name that outlives the call.
            let err = unsafe {
                rdkafka::bindings::rd_kafka_mock_partition_set_leader(
                    self.cluster,
                    name.as_ptr(),
                    p,
                    1 + (p + moves) % self.brokers,
                )
            };
            assert_eq!(err as i32, 0, "mock leader of {topic}-{p}");
        }
    }

    /// `topic` with `partitions`, partition p led by broker `1 + p % brokers`.
    pub fn topic(&self, topic: &str, partitions: i32) {
        let name = std::ffi::CString::new(topic).unwrap();
        // SAFETY: the live mock, and a NUL-terminated name that outlives the calls.
        unsafe {
            let err = rdkafka::bindings::rd_kafka_mock_topic_create(
                self.cluster,
                name.as_ptr(),
                partitions,
                self.brokers,
            );
            assert_eq!(err as i32, 0, "mock topic {topic}");
            for p in 0..partitions {
                let err = rdkafka::bindings::rd_kafka_mock_partition_set_leader(
                    self.cluster,
                    name.as_ptr(),
                    p,
                    1 + p % self.brokers,
                );
                assert_eq!(err as i32, 0, "mock leader of {topic}-{p}");
            }
        }
    }
}
