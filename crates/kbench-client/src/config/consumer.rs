//! How a consumer fetches and keeps its group membership alive: Java's consumer settings and their
//! defaults (Kafka 4.x). Plain data: a spec holds them whole. Which group, where to start and
//! whether to commit are a workload's own choices ([`super::ConsumerProperties`] carries the
//! properties that set them).

use std::time::Duration;

use super::{Conflict, PropertyError};
use crate::assignor::Assignor;

/// Where a consumer starts when it has no committed offset (`auto.offset.reset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum OffsetReset {
    Earliest,
    Latest,
}

impl OffsetReset {
    pub fn name(self) -> &'static str {
        match self {
            OffsetReset::Earliest => "earliest",
            OffsetReset::Latest => "latest",
        }
    }
}

impl std::str::FromStr for OffsetReset {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "earliest" | "smallest" | "beginning" => Ok(OffsetReset::Earliest),
            "latest" | "largest" | "end" => Ok(OffsetReset::Latest),
            _ => Err("expected earliest or latest".into()),
        }
    }
}

/// `group.protocol`: the classic group protocol (JoinGroup, SyncGroup, Heartbeat), or KIP-848's
/// consumer protocol (ConsumerGroupHeartbeat: the coordinator assigns, and partitions move one
/// by one, incrementally).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupProtocol {
    #[default]
    Classic,
    Consumer,
}

impl GroupProtocol {
    pub fn name(self) -> &'static str {
        match self {
            GroupProtocol::Classic => "classic",
            GroupProtocol::Consumer => "consumer",
        }
    }
}

/// Consumer settings with their Java defaults (Kafka 4.x).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ConsumerSettings {
    /// `auto.commit.interval.ms`: how often a committing consumer commits.
    pub auto_commit_interval: Duration,
    pub session_timeout: Duration,
    pub heartbeat_interval: Duration,
    /// `fetch.max.wait.ms`.
    pub fetch_max_wait: Duration,
    /// `max.partition.fetch.bytes`.
    pub max_partition_fetch_bytes: usize,
    /// `fetch.max.bytes`.
    pub fetch_max_bytes: usize,
    /// `isolation.level=read_committed`: read up to the last stable offset, and leave out the
    /// records of aborted transactions. Kafka's default is read_uncommitted.
    pub read_committed: bool,
    /// `partition.assignment.strategy`, in order of preference: offered in JoinGroup, and run by
    /// kbench when it leads the group. Default `range` (Java's is range then
    /// cooperative-sticky, which rebalances eagerly and picks range wherever every member offers
    /// it: kbench's default joins such groups the same way).
    #[serde(default = "default_assignors")]
    pub assignors: Vec<Assignor>,
    /// `group.protocol`.
    #[serde(default)]
    pub group_protocol: GroupProtocol,
    /// `group.remote.assignor`: with the consumer protocol, the assignor the coordinator is asked
    /// to run (none: the broker's default).
    #[serde(default)]
    pub remote_assignor: Option<String>,
    /// `group.instance.id` (KIP-345): the members are static. Several members of one run take
    /// this id with `-N` after it, N the member's place (kept across a restart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_instance_id: Option<String>,
    /// The keys a property set (`apply`), whatever their values: Java's consumer refuses some
    /// by their presence alone.
    #[serde(skip)]
    pub given: GivenKeys,
}

/// The property keys given to [`ConsumerSettings::apply`] (not a setting: every value compares
/// equal, so that settings compare by what they hold).
#[derive(Debug, Clone, Default)]
pub struct GivenKeys(pub std::collections::BTreeSet<String>);

impl PartialEq for GivenKeys {
    fn eq(&self, _: &GivenKeys) -> bool {
        true
    }
}

fn default_assignors() -> Vec<Assignor> {
    vec![Assignor::Range]
}

impl Default for ConsumerSettings {
    fn default() -> Self {
        ConsumerSettings {
            auto_commit_interval: Duration::from_millis(5_000),
            session_timeout: Duration::from_millis(45_000),
            heartbeat_interval: Duration::from_millis(3_000),
            fetch_max_wait: Duration::from_millis(500),
            max_partition_fetch_bytes: 1_048_576,
            fetch_max_bytes: 52_428_800,
            read_committed: false,
            assignors: default_assignors(),
            group_protocol: GroupProtocol::Classic,
            remote_assignor: None,
            group_instance_id: None,
            given: GivenKeys::default(),
        }
    }
}

impl ConsumerSettings {
    /// Apply one property if it is one of these settings: `Ok(false)` leaves any other key to the
    /// caller.
    pub fn apply(&mut self, flag: &str, key: &str, value: &str) -> Result<bool, PropertyError> {
        let bad = |what: &str| PropertyError::value(flag, key, value, what);
        let ms = |v: &str| -> Result<Duration, PropertyError> {
            v.parse::<u64>()
                .map(Duration::from_millis)
                .map_err(|_| bad("expected a whole number of milliseconds"))
        };
        let bytes = |v: &str| -> Result<usize, PropertyError> {
            match v.parse::<u64>() {
                Ok(n) if (1..=i32::MAX as u64).contains(&n) => Ok(n as usize),
                _ => Err(bad("expected a whole number of bytes from 1 to 2147483647")),
            }
        };
        match key {
            "auto.commit.interval.ms" => self.auto_commit_interval = ms(value)?,
            "session.timeout.ms" => self.session_timeout = ms(value)?,
            "heartbeat.interval.ms" => self.heartbeat_interval = ms(value)?,
            "fetch.max.wait.ms" | "fetch.wait.max.ms" => self.fetch_max_wait = ms(value)?,
            "max.partition.fetch.bytes" | "fetch.message.max.bytes" => {
                self.max_partition_fetch_bytes = bytes(value)?
            }
            "fetch.max.bytes" => self.fetch_max_bytes = bytes(value)?,
            "isolation.level" => {
                self.read_committed = match value.to_ascii_lowercase().as_str() {
                    "read_committed" => true,
                    "read_uncommitted" => false,
                    _ => return Err(bad("expected read_uncommitted or read_committed")),
                }
            }
            "group.protocol" => {
                self.group_protocol = match value.to_ascii_lowercase().as_str() {
                    "classic" => GroupProtocol::Classic,
                    "consumer" => GroupProtocol::Consumer,
                    _ => return Err(bad("expected classic or consumer")),
                }
            }
            "group.remote.assignor" => {
                if value.is_empty() {
                    return Err(bad("expected an assignor's name (uniform, range)"));
                }
                self.remote_assignor = Some(value.to_string());
            }
            "group.instance.id" => {
                // Kafka's rule for the id (JoinGroupRequest.validateGroupInstanceId).
                let legal = !value.is_empty()
                    && value.len() <= 249
                    && value != "."
                    && value != ".."
                    && value
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
                if !legal {
                    return Err(bad(
                        "expected a member's static id (KIP-345): 1 to 249 of a-z, A-Z, 0-9, '.', '_' and '-', not '.' or '..'",
                    ));
                }
                self.group_instance_id = Some(value.to_string());
            }
            "partition.assignment.strategy" => {
                self.assignors = Assignor::parse_list(value).map_err(|e| bad(&e))?
            }
            _ => return Ok(false),
        }
        self.given.0.insert(key.to_string());
        Ok(true)
    }

    /// The combinations Java's consumer refuses.
    pub fn check(&self) -> Result<(), Conflict> {
        // Kafka 4.x's consumer refuses the settings the other group protocol has no use for:
        // under KIP-848 the coordinator owns the session, the heartbeat interval and the
        // assignor. Refused when given at all (Java's `checkUnsupportedConfigsPostProcess` looks
        // for the key, whatever its value), or set away from the default another way (a `/v1`
        // body's field).
        let defaults = ConsumerSettings::default();
        let given = |key: &str| self.given.0.contains(key);
        match self.group_protocol {
            GroupProtocol::Consumer => {
                let unused = [
                    (
                        "session.timeout.ms",
                        given("session.timeout.ms")
                            || self.session_timeout != defaults.session_timeout,
                    ),
                    (
                        "heartbeat.interval.ms",
                        given("heartbeat.interval.ms")
                            || self.heartbeat_interval != defaults.heartbeat_interval,
                    ),
                    (
                        "partition.assignment.strategy",
                        given("partition.assignment.strategy")
                            || self.assignors != defaults.assignors,
                    ),
                ];
                if let Some(&(key, _)) = unused.iter().find(|(_, set)| *set) {
                    return Err(Conflict {
                        key,
                        reason: "cannot be set with group.protocol=consumer (KIP-848: the group coordinator keeps the session, the heartbeat interval and the assignor; the broker's group.consumer.* settings, and group.remote.assignor, choose them)".into(),
                    });
                }
            }
            GroupProtocol::Classic if self.remote_assignor.is_some() => {
                return Err(Conflict {
                    key: "group.remote.assignor",
                    reason: "is for group.protocol=consumer (KIP-848); the classic protocol's members assign, with partition.assignment.strategy".into(),
                });
            }
            GroupProtocol::Classic => {}
        }
        if self.heartbeat_interval.is_zero() || self.heartbeat_interval >= self.session_timeout {
            return Err(Conflict {
                key: "heartbeat.interval.ms",
                reason: format!(
                    "{} ms is not above zero and below session.timeout.ms ({} ms)",
                    self.heartbeat_interval.as_millis(),
                    self.session_timeout.as_millis()
                ),
            });
        }
        Ok(())
    }
}
