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
