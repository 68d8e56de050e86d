//! The group session ([`kbench_client::GroupConsumer`]) against librdkafka's mock cluster, in
//! this process: three brokers, a group coordinator that is not Tansu's, librdkafka writing.
//! Members leave, join and crash while records arrive; every record written is read by the
//! members that remain, and every partition has a reader again within the rebalance timeout —
//! seconds each, without the CLI.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kbench_client::assignor::Assignor;
use kbench_client::config::GroupProtocol;
use kbench_client::{
    Cluster, ClusterConfig, Commits, ConsumerOptions, GroupConfig, GroupConsumer, GroupCounters,
    MemberEnd, OffsetReset, Polled, SessionSettings, StartPolicy,
};
use rdkafka::ClientConfig;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use tokio_util::sync::CancellationToken;

const PARTITIONS: i32 = 6;
/// The mock holds a rebalance of a formed group for a second less than the session.
const SESSION: Duration = Duration::from_secs(4);

/// Every offset read, per partition, by any member (a record read twice is there once).
type Read = Arc<Mutex<BTreeMap<i32, BTreeSet<i64>>>>;

/// `records` records at `per_sec`, partition by partition in turn, from librdkafka; how many
/// each partition got.
fn write(bootstrap: &str, topic: &str, records: u64, per_sec: u64) -> BTreeMap<i32, u64> {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "5")
        .create()
        .expect("librdkafka producer");
    let began = Instant::now();
    let mut counts = BTreeMap::new();
    for i in 0..records {
        let due = began + Duration::from_secs_f64(i as f64 / per_sec as f64);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let p = (i % PARTITIONS as u64) as i32;
        let value = i.to_string();
        loop {
            match producer.send(BaseRecord::<(), _>::to(topic).partition(p).payload(&value)) {
                Ok(()) => break,
                Err(_) => {
                    producer.poll(Duration::from_millis(10));
                }
            }
        }
        producer.poll(Duration::ZERO);
        *counts.entry(p).or_default() += 1;
    }
    producer.flush(Duration::from_secs(10)).expect("flush");
    counts
}

fn group(topic: &str, name: &str, assignors: Vec<Assignor>) -> GroupConfig {
    GroupConfig {
        group_id: name.into(),
        topic: topic.into(),
        session_timeout: SESSION,
        rebalance_timeout: Duration::from_secs(30),
        assignors,
        protocol: GroupProtocol::Classic,
        remote_assignor: None,
        instance_id: None,
        heartbeat_interval: Duration::from_millis(500),
    }
}

fn options() -> ConsumerOptions {
    ConsumerOptions {
        partition_max_bytes: 1 << 20,
        max_bytes: 1 << 20,
        max_wait: Duration::from_millis(100),
        read_committed: false,
        reset: OffsetReset::Earliest,
        retry_backoff: Duration::from_millis(100),
    }
}

/// A member reading into `read` until `stop`, then ending as `end` says (read when it stops).
struct Member {
    stop: CancellationToken,
    end: Arc<Mutex<MemberEnd>>,
    task: tokio::task::JoinHandle<()>,
}

async fn member(
    bootstrap: &str,
    config: GroupConfig,
    read: Read,
    counters: Arc<GroupCounters>,
) -> Member {
    let cluster = Arc::new(
        Cluster::connect(ClusterConfig::new(
            bootstrap.split(',').map(str::to_string).collect(),
            "kbench-test",
            Default::default(),
        ))
        .await
        .expect("connect"),
    );
    let (_, layout) = cluster.metadata(&config.topic).await.expect("metadata");
    let stop = CancellationToken::new();
    let end = Arc::new(Mutex::new(MemberEnd::RunEnded));
    let settings = SessionSettings {
        commits: Commits::Every(Duration::from_millis(500)),
        start: StartPolicy::reset(OffsetReset::Earliest),
        counters,
    };
    let mut g = GroupConsumer::start(cluster, &layout, config, options(), settings, &stop)
        .await
        .expect("join")
        .expect("joined before a stop");
    let (stop_, end_) = (stop.clone(), end.clone());
    let task = tokio::spawn(async move {
        let mut decoder = kbench_wire::BatchDecoder::new();
        let mut positions: BTreeMap<i32, i64> = BTreeMap::new();
        loop {
            let polled = tokio::select! {
                _ = stop_.cancelled() => break,
                p = g.poll() => p,
            };
            match polled {
                None => break,
                Some(Polled::Assigned(a)) => positions.extend(a.added),
                Some(Polled::Revoked(r)) => {
                    for p in r.positions.keys() {
                        positions.remove(p);
                    }
                }
                Some(Polled::Failed(e)) => panic!("the member failed: {e}"),
                Some(Polled::Fetched(f)) => {
                    for part in &f.parts {
                        let Some(at) = positions.get(&part.partition).copied() else {
                            continue;
                        };
                        let mut next = at;
                        let mut offsets = Vec::new();
                        decoder
                            .decode_all(&part.data.records, |header, record| {
                                if header.is_control() || record.offset < at {
                                    return;
                                }
                                offsets.push(record.offset);
                                next = next.max(record.offset + 1);
                            })
                            .expect("decode");
                        read.lock()
                            .unwrap()
                            .entry(part.partition)
                            .or_default()
                            .extend(offsets);
                        positions.insert(part.partition, next);
                        g.mark(part.partition, next);
                    }
                }
            }
        }
        let how = *end_.lock().unwrap();
        g.close(how).await;
    });
    Member { stop, end, task }
}

impl Member {
    async fn end(self, how: MemberEnd) {
        *self.end.lock().unwrap() = how;
        self.stop.cancel();
        let _ = self.task.await;
    }
}

/// Wait until every record written has been read (true), or `within` passed.
async fn all_read(read: &Read, written: &BTreeMap<i32, u64>, within: Duration) -> bool {
    let until = Instant::now() + within;
    while Instant::now() < until {
        let done = {
            let r = read.lock().unwrap();
            written
                .iter()
                .all(|(p, n)| r.get(p).is_some_and(|o| o.len() as u64 >= *n))
        };
        if done {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// What was read against what was written: every offset of every partition, once at least.
fn missing(read: &Read, written: &BTreeMap<i32, u64>) -> BTreeMap<i32, u64> {
    let r = read.lock().unwrap();
    written
        .iter()
        .map(|(p, n)| (*p, n - r.get(p).map_or(0, |o| o.len() as u64).min(*n)))
        .filter(|(_, m)| *m > 0)
        .collect()
}

/// Three members read while librdkafka writes 6 000 records over 6 s; at 2 s one ends as `how`
/// says (or, with `join`, a fourth joins); every record is read by the members left, within the
/// rebalance the mock holds (a session less a second) and, for a crash, the session that decides
/// it.
async fn changing(name: &str, how: Option<MemberEnd>, assignors: Vec<Assignor>) {
    let mock = MockCluster::new(3).expect("mock cluster");
    let bootstrap = mock.bootstrap_servers();
    let topic = format!("session-{name}");
    mock.create_topic(&topic, PARTITIONS, 3).expect("topic");
    let read: Read = Arc::default();
    let counters = Arc::new(GroupCounters::default());
    let config = group(&topic, &format!("g-{name}"), assignors);
    let mut members = Vec::new();
    for _ in 0..3 {
        members.push(member(&bootstrap, config.clone(), read.clone(), counters.clone()).await);
    }
    let writer = {
        let (b, t) = (bootstrap.clone(), topic.clone());
        std::thread::spawn(move || write(&b, &t, 6_000, 1_000))
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    match how {
        Some(end) => {
            let m = members.pop().unwrap();
            m.end(end).await;
        }
        None => {
            members.push(member(&bootstrap, config.clone(), read.clone(), counters.clone()).await)
        }
    }
    let written = tokio::task::spawn_blocking(move || writer.join().expect("writer"))
        .await
        .unwrap();
    assert_eq!(written.values().sum::<u64>(), 6_000);
    // The crash's session, the mock's hold (a session less a second) and a margin.
    let within = SESSION * 3;
    let complete = all_read(&read, &written, within).await;
    let rebalancing = counters.rebalancing_since();
    for m in members {
        m.end(MemberEnd::RunEnded).await;
    }
    assert!(
        complete,
        "{name}: missing {:?} (rebalancing since {rebalancing:?}; errors {:?})",
        missing(&read, &written),
        counters.errors()
    );
    assert!(
        counters.rejoins.load(std::sync::atomic::Ordering::Relaxed) >= 2,
        "{name}: the members rebalanced"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_leaves_hands_every_partition_on() {
    changing("leave", Some(MemberEnd::Left), vec![Assignor::Range]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_crashes_hands_every_partition_on_after_its_session() {
    changing("crash", Some(MemberEnd::Crashed), vec![Assignor::Range]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_joins_takes_its_share_and_nothing_is_left_unread() {
    changing("join", None, vec![Assignor::Range]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cooperative_member_that_leaves_hands_its_partitions_on() {
    changing(
        "cooperative-leave",
        Some(MemberEnd::Left),
        vec![Assignor::CooperativeSticky],
    )
    .await;
}
