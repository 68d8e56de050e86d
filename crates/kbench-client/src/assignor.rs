//! Partition assignors of the classic consumer-group protocol, as Java's consumer names and runs
//! them (`partition.assignment.strategy`): the group's leader calls one over every member's
//! subscription. Pure functions of the membership and the partition counts, so that the
//! assignment is checked against Kafka's published algorithms (the Javadoc examples of
//! `RangeAssignor` and `RoundRobinAssignor`) without a broker.
//!
//! Members are ordered as Java orders them (`AbstractPartitionAssignor.MemberInfo`): by
//! `group.instance.id` where both have one, a static member before a dynamic one, else by member
//! id. Rack-aware assignment (KIP-881) needs rack information kbench does not send, and so does not
//! apply, as in Java without `client.rack`.

use std::collections::{BTreeMap, BTreeSet};

/// An assignor, by the names Java and librdkafka give it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Assignor {
    /// `range` (Java's default, with `cooperative-sticky` after it): per topic, consecutive
    /// ranges of partitions, the first members one more each when they do not divide evenly.
    Range,
    /// `roundrobin`: every subscribed partition, sorted by topic and partition, dealt in turn to
    /// the members subscribed to its topic.
    #[serde(rename = "roundrobin")]
    RoundRobin,
}

impl Assignor {
    /// The protocol name sent in JoinGroup (Java's `ConsumerPartitionAssignor.name()`).
    pub fn name(self) -> &'static str {
        match self {
            Assignor::Range => "range",
            Assignor::RoundRobin => "roundrobin",
        }
    }

    /// The assignor a JoinGroup answer names, if kbench has it.
    pub fn by_protocol(name: &str) -> Option<Assignor> {
        [Assignor::Range, Assignor::RoundRobin]
            .into_iter()
            .find(|a| a.name() == name)
    }

    /// The members' partitions: member id → topic → partitions, ascending.
    pub fn assign(self, members: &[Member], partitions: &BTreeMap<String, i32>) -> Assignment {
        match self {
            Assignor::Range => range(members, partitions),
            Assignor::RoundRobin => round_robin(members, partitions),
        }
    }

    /// `partition.assignment.strategy`: a comma-separated list of names or Java class names, in
    /// order of preference.
    pub fn parse_list(value: &str) -> Result<Vec<Assignor>, String> {
        let mut out = Vec::new();
        for part in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let a: Assignor = part.parse()?;
            if !out.contains(&a) {
                out.push(a);
            }
        }
        if out.is_empty() {
            return Err("expected one assignor or more, such as range or roundrobin".into());
        }
        Ok(out)
    }
}

impl std::str::FromStr for Assignor {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let short = s.trim().rsplit('.').next().unwrap_or(s);
        match short.to_ascii_lowercase().as_str() {
            "range" | "rangeassignor" => Ok(Assignor::Range),
            "roundrobin" | "roundrobinassignor" => Ok(Assignor::RoundRobin),
            "cooperative-sticky" | "cooperativestickyassignor" | "sticky" | "stickyassignor" => {
                Err(format!(
                    "{s}: kbench does not run the sticky assignors yet (range and roundrobin it does)"
                ))
            }
            _ => Err(format!("{s}: expected range or roundrobin")),
        }
    }
}

/// A member as the leader sees it in JoinGroup's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub member_id: String,
    /// `group.instance.id` (KIP-345), for a static member.
    pub instance_id: Option<String>,
    /// The topics it subscribed to.
    pub topics: Vec<String>,
}

impl Member {
    pub fn new(member_id: &str, topics: &[&str]) -> Member {
        Member {
            member_id: member_id.to_string(),
            instance_id: None,
            topics: topics.iter().map(|t| t.to_string()).collect(),
        }
    }

    /// Java's `MemberInfo` order.
    fn order(&self, other: &Member) -> std::cmp::Ordering {
        match (&self.instance_id, &other.instance_id) {
            (Some(a), Some(b)) => a.cmp(b),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => self.member_id.cmp(&other.member_id),
        }
    }
}

/// Member id → topic → partitions. Every member is present, assigned nothing or not.
pub type Assignment = BTreeMap<String, BTreeMap<String, Vec<i32>>>;

fn empty(members: &[Member]) -> Assignment {
    members
        .iter()
        .map(|m| (m.member_id.clone(), BTreeMap::new()))
        .collect()
}

fn sorted(members: &[Member]) -> Vec<&Member> {
    let mut v: Vec<&Member> = members.iter().collect();
    v.sort_by(|a, b| a.order(b));
    v
}

/// Java's `RangeAssignor` without racks: for each topic, its subscribers in member order; with
/// `n` partitions over `c` of them, each takes `n / c` consecutive partitions and the first
/// `n % c` one more. A topic the cluster does not know is left out.
fn range(members: &[Member], partitions: &BTreeMap<String, i32>) -> Assignment {
    let mut out = empty(members);
    let topics: BTreeSet<&String> = members.iter().flat_map(|m| &m.topics).collect();
    let ordered = sorted(members);
    for topic in topics {
        let Some(&count) = partitions.get(topic) else {
            continue;
        };
        let subscribers: Vec<&&Member> = ordered
            .iter()
            .filter(|m| m.topics.contains(topic))
            .collect();
        let (per, extra) = (
            count as usize / subscribers.len(),
            count as usize % subscribers.len(),
        );
        let mut next = 0;
        for (i, m) in subscribers.into_iter().enumerate() {
            let take = per + usize::from(i < extra);
            if take > 0 {
                out.entry(m.member_id.clone()).or_default().insert(
                    topic.clone(),
                    (next..next + take).map(|p| p as i32).collect(),
                );
            }
            next += take;
        }
    }
    out
}

/// Java's `RoundRobinAssignor`: the partitions of every subscribed topic, sorted by topic then
/// partition, each dealt to the next member in a circle (in member order) that subscribed to its
/// topic.
fn round_robin(members: &[Member], partitions: &BTreeMap<String, i32>) -> Assignment {
    let mut out = empty(members);
    let ordered = sorted(members);
    if ordered.is_empty() {
        return out;
    }
    let topics: BTreeSet<&String> = members.iter().flat_map(|m| &m.topics).collect();
    let mut turn = 0;
    for topic in topics {
        let Some(&count) = partitions.get(topic) else {
            continue;
        };
        for p in 0..count {
            while !ordered[turn % ordered.len()].topics.contains(topic) {
                turn += 1;
            }
            let m = ordered[turn % ordered.len()];
            turn += 1;
            out.entry(m.member_id.clone())
                .or_default()
                .entry(topic.clone())
                .or_default()
                .push(p);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(list: &[(&str, i32)]) -> BTreeMap<String, i32> {
        list.iter().map(|(t, n)| (t.to_string(), *n)).collect()
    }

    /// `member: t0p0 t0p1 …` for one member.
    fn said(a: &Assignment, member: &str) -> String {
        a[member]
            .iter()
            .flat_map(|(t, ps)| ps.iter().map(move |p| format!("{t}p{p}")))
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn range_matches_the_javadoc_example() {
        // RangeAssignor's Javadoc: two consumers C0, C1 subscribed to t0 and t1, three
        // partitions each: C0 [t0p0, t0p1, t1p0, t1p1], C1 [t0p2, t1p2].
        let members = [
            Member::new("C0", &["t0", "t1"]),
            Member::new("C1", &["t0", "t1"]),
        ];
        let a = Assignor::Range.assign(&members, &counts(&[("t0", 3), ("t1", 3)]));
        assert_eq!(said(&a, "C0"), "t0p0 t0p1 t1p0 t1p1");
        assert_eq!(said(&a, "C1"), "t0p2 t1p2");
    }

    #[test]
    fn round_robin_matches_the_javadoc_examples() {
        // RoundRobinAssignor's Javadoc, identical subscriptions: C0 [t0p0, t0p2, t1p1],
        // C1 [t0p1, t1p0, t1p2].
        let members = [
            Member::new("C0", &["t0", "t1"]),
            Member::new("C1", &["t0", "t1"]),
        ];
        let a = Assignor::RoundRobin.assign(&members, &counts(&[("t0", 3), ("t1", 3)]));
        assert_eq!(said(&a, "C0"), "t0p0 t0p2 t1p1");
        assert_eq!(said(&a, "C1"), "t0p1 t1p0 t1p2");
        // Different subscriptions: t0 1 partition, t1 2, t2 3; C0 on t0, C1 on t0 and t1, C2 on
        // t0, t1, t2: C0 [t0p0], C1 [t1p0], C2 [t1p1, t2p0, t2p1, t2p2].
        let members = [
            Member::new("C0", &["t0"]),
            Member::new("C1", &["t0", "t1"]),
            Member::new("C2", &["t0", "t1", "t2"]),
        ];
        let a = Assignor::RoundRobin.assign(&members, &counts(&[("t0", 1), ("t1", 2), ("t2", 3)]));
        assert_eq!(said(&a, "C0"), "t0p0");
        assert_eq!(said(&a, "C1"), "t1p0");
        assert_eq!(said(&a, "C2"), "t1p1 t2p0 t2p1 t2p2");
    }

    #[test]
    fn members_are_ordered_as_java_orders_them() {
        // Static members first, by instance id; then dynamic ones by member id.
        let mut members = vec![
            Member::new("a-dynamic", &["t"]),
            Member::new("z-static", &["t"]),
            Member::new("m-static", &["t"]),
        ];
        members[1].instance_id = Some("i-1".into());
        members[2].instance_id = Some("i-2".into());
        let a = Assignor::Range.assign(&members, &counts(&[("t", 5)]));
        assert_eq!(said(&a, "z-static"), "tp0 tp1");
        assert_eq!(said(&a, "m-static"), "tp2 tp3");
        assert_eq!(said(&a, "a-dynamic"), "tp4");
    }

    #[test]
    fn a_member_is_given_only_topics_it_subscribed_to_and_unknown_topics_are_left_out() {
        let members = [
            Member::new("kbench", &["ours"]),
            Member::new("other", &["theirs", "missing"]),
        ];
        for assignor in [Assignor::Range, Assignor::RoundRobin] {
            let a = assignor.assign(&members, &counts(&[("ours", 4), ("theirs", 2)]));
            assert_eq!(
                said(&a, "kbench"),
                "oursp0 oursp1 oursp2 oursp3",
                "{assignor:?}"
            );
            assert_eq!(said(&a, "other"), "theirsp0 theirsp1", "{assignor:?}");
        }
        // More members than partitions: some get nothing, and are still answered.
        let members = [Member::new("a", &["t"]), Member::new("b", &["t"])];
        let a = Assignor::Range.assign(&members, &counts(&[("t", 1)]));
        assert_eq!(said(&a, "a"), "tp0");
        assert_eq!(said(&a, "b"), "");
    }

    #[test]
    fn strategies_are_read_by_java_and_librdkafka_names() {
        assert_eq!(
            Assignor::parse_list(
                "org.apache.kafka.clients.consumer.RoundRobinAssignor, range,roundrobin"
            ),
            Ok(vec![Assignor::RoundRobin, Assignor::Range])
        );
        let sticky = Assignor::parse_list("cooperative-sticky").unwrap_err();
        assert!(sticky.contains("sticky assignors"), "{sticky}");
        assert!(Assignor::parse_list(" , ").is_err());
        assert!(Assignor::parse_list("fair").unwrap_err().contains("fair"));
        assert_eq!(
            Assignor::by_protocol("roundrobin"),
            Some(Assignor::RoundRobin)
        );
        assert_eq!(Assignor::by_protocol("cooperative-sticky"), None);
    }
}
