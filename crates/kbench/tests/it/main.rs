//! kbench's integration tests, one binary: every file here is a module, and `common` (with the
//! librdkafka, mock-cluster and REST Proxy helpers) is shared by all of them. One binary is one
//! link and one process instead of one per file — the suite's build time — and tests of every file
//! share the runner's threads, so a slow file no longer runs alone at the end of its binary. Run one
//! file's tests with its module name: `cargo test --release -p kbench --test it cluster_moves::`.

mod common;
#[path = "common/create_topics_tap.rs"]
mod create_topics_tap;
#[path = "common/echo.rs"]
mod echo;
#[path = "common/kafka_1_1.rs"]
mod kafka_1_1;
#[path = "common/librdkafka.rs"]
mod librdkafka;
#[path = "common/mock.rs"]
mod mock;
#[path = "common/rest_proxy_double.rs"]
mod rest_proxy_double;
#[path = "common/schema_registry_double.rs"]
mod schema_registry_double;

mod cluster_moves;
mod codec;
mod compare;
mod consume;
mod dashboard;
mod deploy;
mod distributed;
mod e2e;
mod e2e_latency;
mod failures;
mod faults;
mod groups;
mod history;
mod idempotence;
mod legacy;
mod log_semantics;
mod metrics;
mod omb;
mod open_loop;
mod produce;
mod progress;
mod quickstart;
mod report;
mod request_reply;
mod rest_proxy;
mod sasl;
mod schemas;
mod serve;
mod slo;
mod sweep;
mod timeline;
mod tls;
mod verify;
