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
    /// `cooperative-sticky` (KIP-429): as balanced as round-robin, every member keeping what it
    /// owned up to its share; a partition moving from one member to another is given only in
    /// the round after its owner let it go (the group's members rejoin at once to make it).
    CooperativeSticky,
}

impl Assignor {
    /// The protocol name sent in JoinGroup (Java's `ConsumerPartitionAssignor.name()`).
    pub fn name(self) -> &'static str {
        match self {
            Assignor::Range => "range",
            Assignor::RoundRobin => "roundrobin",
            Assignor::CooperativeSticky => "cooperative-sticky",
        }
    }

    /// Whether the group rebalances incrementally with it (KIP-429's COOPERATIVE protocol): a
    /// member keeps reading what it owns through a rebalance, gives up only what it was asked
    /// to, and then joins again so that the partitions given up find their new owners.
    pub fn is_cooperative(self) -> bool {
        self == Assignor::CooperativeSticky
    }

    /// The assignor a JoinGroup answer names, if kbench has it.
    pub fn by_protocol(name: &str) -> Option<Assignor> {
        [
            Assignor::Range,
            Assignor::RoundRobin,
            Assignor::CooperativeSticky,
        ]
        .into_iter()
        .find(|a| a.name() == name)
    }

    /// The members' partitions: member id → topic → partitions, ascending.
    pub fn assign(self, members: &[Member], partitions: &BTreeMap<String, i32>) -> Assignment {
        match self {
            Assignor::Range => range(members, partitions),
            Assignor::RoundRobin => round_robin(members, partitions),
            Assignor::CooperativeSticky => {
                let claims = claims(members, partitions);
                let held = held(members, partitions, &claims);
                withhold_moving(sticky(members, partitions, &claims), &held)
            }
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
            return Err(
                "expected one assignor or more, such as range, roundrobin or cooperative-sticky"
                    .into(),
            );
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
            "cooperative-sticky" | "cooperativestickyassignor" => Ok(Assignor::CooperativeSticky),
            "sticky" | "stickyassignor" => Err(format!(
                "{s}: kbench does not run the eager sticky assignor (KIP-54); cooperative-sticky is its incremental successor, and range and roundrobin are there too"
            )),
            _ => Err(format!(
                "{s}: expected range, roundrobin or cooperative-sticky"
            )),
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
    /// The partitions it says it owns (ConsumerProtocolSubscription v1+), by topic: what the
    /// sticky assignors keep.
    pub owned: BTreeMap<String, Vec<i32>>,
    /// The generation in which it owned them (v2+, or the cooperative-sticky user data); -1
    /// unknown. Of two members claiming a partition, the later generation keeps it.
    pub generation: i32,
}

impl Member {
    pub fn new(member_id: &str, topics: &[&str]) -> Member {
        Member {
            member_id: member_id.to_string(),
            instance_id: None,
            topics: topics.iter().map(|t| t.to_string()).collect(),
            owned: BTreeMap::new(),
            generation: -1,
        }
    }

    /// The same member, saying it owns `owned` (`topic`, partition) since `generation`.
    pub fn owning(mut self, owned: &[(&str, i32)], generation: i32) -> Member {
        for (t, p) in owned {
            self.owned.entry(t.to_string()).or_default().push(*p);
        }
        self.generation = generation;
        self
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

/// A partition: its topic and index.
type Tp = (String, i32);

/// Who owns each partition the members say they own, as Java's `AbstractStickyAssignor` decides
/// it: only members of the latest generation any member reports claim (a member that missed a
/// generation owns nothing any more), each a partition of a topic it subscribes to and the
/// cluster has; `None` where two of them claim one (Java gives it to neither, and logs it).
fn claims(members: &[Member], partitions: &BTreeMap<String, i32>) -> BTreeMap<Tp, Option<String>> {
    let latest = members.iter().map(|m| m.generation).max().unwrap_or(-1);
    owners(
        members.iter().filter(|m| m.generation == latest),
        partitions,
    )
}

/// Who may still be reading each partition: the claims, and besides them what members of an
/// older generation say they own (`None` where two do). Java gives a partition claimed only by a
/// member a generation behind to another member at once; kbench withholds it for a round, as it
/// withholds a moving partition, because that member may be reading it still: a coordinator that
/// moves a group to a new generation while a member syncs (the upstream Tansu binary does, at
/// every changed subscription) refuses that member's SyncGroup with REBALANCE_IN_PROGRESS, and
/// the member, still in the group, reads on what it owned through its next join. Given to
/// another member at once, the partition would be read by two.
fn held(
    members: &[Member],
    partitions: &BTreeMap<String, i32>,
    claims: &BTreeMap<Tp, Option<String>>,
) -> BTreeMap<Tp, Option<String>> {
    let latest = members.iter().map(|m| m.generation).max().unwrap_or(-1);
    let stale = owners(members.iter().filter(|m| m.generation < latest), partitions);
    let mut held = claims.clone();
    for (tp, owner) in stale {
        held.entry(tp).or_insert(owner);
    }
    held
}

/// Each partition `members` say they own — of a topic the member subscribes to and the cluster
/// has — with the one member that says so, or `None` where several do.
fn owners<'a>(
    members: impl Iterator<Item = &'a Member>,
    partitions: &BTreeMap<String, i32>,
) -> BTreeMap<Tp, Option<String>> {
    let mut out: BTreeMap<Tp, Option<String>> = BTreeMap::new();
    for m in members {
        for (topic, ps) in m.owned.iter().filter(|(t, _)| m.topics.contains(*t)) {
            let Some(&count) = partitions.get(topic) else {
                continue;
            };
            for &p in ps.iter().filter(|p| (0..count).contains(*p)) {
                out.entry((topic.clone(), p))
                    .and_modify(|owner| *owner = None)
                    .or_insert_with(|| Some(m.member_id.clone()));
            }
        }
    }
    out
}

/// Java's sticky assignment (`AbstractStickyAssignor`): every member gets `⌊n/c⌋` or `⌈n/c⌉` of
/// the `n` partitions (only `n % c` members the larger share), keeping first what it owns (up to
/// its share, lowest partitions first); the rest, in topic and partition order, are dealt in
/// turn to the members below the smaller share, then one each to members at it. Where every
/// member subscribes to the same topics (kbench's case, and the usual one) this is Java's
/// `constrainedAssign`, over all of them at once; where subscriptions differ kbench runs it per
/// topic over the topic's subscribers, which is balanced per topic (Java's `generalAssign`
/// balances across topics, a larger algorithm kbench does not carry).
fn sticky(
    members: &[Member],
    partitions: &BTreeMap<String, i32>,
    claims: &BTreeMap<Tp, Option<String>>,
) -> Assignment {
    let mut out = empty(members);
    let ordered = sorted(members);
    let subscription = |m: &Member| m.topics.iter().cloned().collect::<BTreeSet<String>>();
    let all_equal = ordered
        .windows(2)
        .all(|w| subscription(w[0]) == subscription(w[1]));
    let every_partition = |topics: &BTreeSet<String>| -> Vec<Tp> {
        topics
            .iter()
            .filter_map(|t| partitions.get(t).map(|n| (t, *n)))
            .flat_map(|(t, n)| (0..n).map(move |p| (t.clone(), p)))
            .collect()
    };
    if all_equal {
        if let Some(first) = ordered.first() {
            constrained(
                &ordered,
                every_partition(&subscription(first)),
                claims,
                &mut out,
            );
        }
    } else {
        let topics: BTreeSet<String> = members.iter().flat_map(|m| m.topics.clone()).collect();
        for topic in topics {
            let subscribers: Vec<&Member> = ordered
                .iter()
                .copied()
                .filter(|m| m.topics.contains(&topic))
                .collect();
            let one = BTreeSet::from([topic]);
            constrained(&subscribers, every_partition(&one), claims, &mut out);
        }
    }
    out
}

/// One pass of the sticky assignment over `members` (in member order) and `all` (sorted).
fn constrained(
    members: &[&Member],
    all: Vec<Tp>,
    claims: &BTreeMap<Tp, Option<String>>,
    out: &mut Assignment,
) {
    if members.is_empty() || all.is_empty() {
        return;
    }
    let (total, c) = (all.len(), members.len());
    let (min, max, expected) = (total / c, total.div_ceil(c), total % c);
    let mut over = 0;
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    let mut taken: BTreeSet<&Tp> = BTreeSet::new();
    let mut under: Vec<&str> = Vec::new();
    let mut at_min: std::collections::VecDeque<&str> = std::collections::VecDeque::new();
    let give = |out: &mut Assignment, member: &str, (topic, p): &Tp| {
        out.entry(member.to_string())
            .or_default()
            .entry(topic.clone())
            .or_default()
            .push(*p);
    };
    for m in members {
        let id = m.member_id.as_str();
        let owned: Vec<&Tp> = all
            .iter()
            .filter(|tp| claims.get(*tp).is_some_and(|o| o.as_deref() == Some(id)))
            .collect();
        let keep = if owned.len() < min {
            under.push(id);
            owned.len()
        } else if owned.len() >= max && over < expected {
            over += 1;
            if over == expected {
                at_min.clear();
            }
            max
        } else {
            if over < expected {
                at_min.push_back(id);
            }
            min
        };
        for tp in &owned[..keep] {
            give(out, id, tp);
            taken.insert(tp);
        }
        count.insert(id, keep);
    }
    let unassigned: Vec<&Tp> = all.iter().filter(|tp| !taken.contains(tp)).collect();
    let mut cursor = 0;
    for tp in unassigned {
        if !under.is_empty() {
            if cursor >= under.len() {
                cursor = 0;
            }
            let id = under[cursor];
            give(out, id, tp);
            let n = count.entry(id).or_default();
            *n += 1;
            if *n == min {
                under.remove(cursor);
                at_min.push_back(id);
            } else {
                cursor += 1;
            }
        } else if let Some(id) = at_min.pop_front() {
            give(out, id, tp);
            *count.entry(id).or_default() += 1;
        }
    }
    for topics in out.values_mut() {
        for ps in topics.values_mut() {
            ps.sort_unstable();
        }
    }
}

/// KIP-429's cooperative step: a partition that another member owns (or that two members claim)
/// is not given in this round. Its owner, no longer assigned it, gives it up and joins again;
/// the round after gives it to its new owner.
fn withhold_moving(
    mut assignment: Assignment,
    claims: &BTreeMap<Tp, Option<String>>,
) -> Assignment {
    for (member, topics) in assignment.iter_mut() {
        for (topic, ps) in topics.iter_mut() {
            ps.retain(|p| match claims.get(&(topic.clone(), *p)) {
                None => true,
                Some(owner) => owner.as_deref() == Some(member.as_str()),
            });
        }
        topics.retain(|_, ps| !ps.is_empty());
    }
    assignment
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
        assert_eq!(
            Assignor::parse_list(
                "org.apache.kafka.clients.consumer.CooperativeStickyAssignor,cooperative-sticky"
            ),
            Ok(vec![Assignor::CooperativeSticky])
        );
        let sticky = Assignor::parse_list("sticky").unwrap_err();
        assert!(sticky.contains("eager sticky assignor"), "{sticky}");
        assert!(Assignor::parse_list(" , ").is_err());
        assert!(Assignor::parse_list("fair").unwrap_err().contains("fair"));
        assert_eq!(
            Assignor::by_protocol("roundrobin"),
            Some(Assignor::RoundRobin)
        );
        assert_eq!(
            Assignor::by_protocol("cooperative-sticky"),
            Some(Assignor::CooperativeSticky)
        );
        assert_eq!(Assignor::by_protocol("sticky"), None);
    }

    /// Every member has ⌊n/c⌋ or ⌈n/c⌉ partitions, each partition exactly one member.
    fn balanced(a: &Assignment, total: usize) {
        let sizes: Vec<usize> = a.values().map(|t| t.values().map(Vec::len).sum()).collect();
        let c = sizes.len();
        assert!(
            sizes
                .iter()
                .all(|s| *s == total / c || *s == total.div_ceil(c)),
            "{a:?}"
        );
        let mut all: Vec<(String, i32)> = a
            .values()
            .flat_map(|t| {
                t.iter()
                    .flat_map(|(t, ps)| ps.iter().map(|p| (t.clone(), *p)))
            })
            .collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), total, "{a:?}");
    }

    #[test]
    fn cooperative_sticky_with_nothing_owned_deals_in_turn_and_balances() {
        // Nothing owned (a new group): dealt in member order below the smaller share (2 of 7),
        // then one more to the first member at it.
        let members = [
            Member::new("a", &["t"]),
            Member::new("b", &["t"]),
            Member::new("c", &["t"]),
        ];
        let a = Assignor::CooperativeSticky.assign(&members, &counts(&[("t", 7)]));
        assert_eq!(said(&a, "a"), "tp0 tp3 tp6");
        assert_eq!(said(&a, "b"), "tp1 tp4");
        assert_eq!(said(&a, "c"), "tp2 tp5");
        balanced(&a, 7);
    }

    #[test]
    fn cooperative_sticky_keeps_what_members_own_as_the_javadoc_example_does() {
        // StickyAssignor's Javadoc: C0, C1, C2 over t0..t3 (2 partitions each), C0 owning
        // [t0p0, t1p1, t3p0], C1 [t0p1, t2p0, t3p1], C2 [t1p0, t2p1]; C1 leaves. Every
        // partition C0 and C2 own stays theirs; C1's three are spread to make 4 and 4, and are
        // given at once (their owner is gone: nothing to wait for).
        let members = [
            Member::new("C0", &["t0", "t1", "t2", "t3"])
                .owning(&[("t0", 0), ("t1", 1), ("t3", 0)], 3),
            Member::new("C2", &["t0", "t1", "t2", "t3"]).owning(&[("t1", 0), ("t2", 1)], 3),
        ];
        let parts = counts(&[("t0", 2), ("t1", 2), ("t2", 2), ("t3", 2)]);
        let a = Assignor::CooperativeSticky.assign(&members, &parts);
        balanced(&a, 8);
        for (m, owned) in [
            ("C0", ["t0p0", "t1p1", "t3p0"].as_slice()),
            ("C2", &["t1p0", "t2p1"]),
        ] {
            let has = said(&a, m);
            assert!(
                owned.iter().all(|p| has.split(' ').any(|h| h == *p)),
                "{m}: {has}"
            );
        }
        assert_eq!(said(&a, "C0"), "t0p0 t0p1 t1p1 t3p0");
        assert_eq!(said(&a, "C2"), "t1p0 t2p0 t2p1 t3p1");
    }

    #[test]
    fn cooperative_sticky_moves_partitions_in_two_rounds() {
        // a and b own 3 each; c joins. Shares of 2: a keeps p0 p1, b keeps p3 p4. Round one
        // gives c nothing (p2 and p5 are still a's and b's); a and b give them up and join
        // again; round two gives them to c.
        let t = counts(&[("t", 6)]);
        let one = [
            Member::new("a", &["t"]).owning(&[("t", 0), ("t", 1), ("t", 2)], 4),
            Member::new("b", &["t"]).owning(&[("t", 3), ("t", 4), ("t", 5)], 4),
            Member::new("c", &["t"]),
        ];
        let a = Assignor::CooperativeSticky.assign(&one, &t);
        assert_eq!(
            (said(&a, "a"), said(&a, "b"), said(&a, "c")),
            ("tp0 tp1".into(), "tp3 tp4".into(), "".into())
        );
        let two = [
            Member::new("a", &["t"]).owning(&[("t", 0), ("t", 1)], 5),
            Member::new("b", &["t"]).owning(&[("t", 3), ("t", 4)], 5),
            Member::new("c", &["t"]).owning(&[], 5),
        ];
        let a = Assignor::CooperativeSticky.assign(&two, &t);
        assert_eq!(
            (said(&a, "a"), said(&a, "b"), said(&a, "c")),
            ("tp0 tp1".into(), "tp3 tp4".into(), "tp2 tp5".into())
        );
        balanced(&a, 6);
    }

    #[test]
    fn only_the_latest_generation_claims_and_a_tie_is_given_to_neither_yet() {
        let t = counts(&[("t", 2)]);
        let members = [
            Member::new("a", &["t"]).owning(&[("t", 0)], 5),
            Member::new("b", &["t"]).owning(&[("t", 0)], 4),
        ];
        let a = Assignor::CooperativeSticky.assign(&members, &t);
        assert_eq!((said(&a, "a"), said(&a, "b")), ("tp0".into(), "tp1".into()));
        // A member a generation behind owns nothing, even uncontested (Java drops its claims).
        let members = [
            Member::new("a", &["t"]).owning(&[("t", 1)], 5),
            Member::new("b", &["t"]).owning(&[("t", 0)], 4),
        ];
        let a = Assignor::CooperativeSticky.assign(&members, &t);
        assert_eq!((said(&a, "a"), said(&a, "b")), ("tp1".into(), "tp0".into()));
        // … but what it says it owns goes to no other member in this round: it may be reading
        // it still (Java would give a tp0 at once; b may have tp1 back).
        let members = [
            Member::new("a", &["t"]),
            Member::new("b", &["t"]).owning(&[("t", 0), ("t", 1)], 4),
            Member::new("c", &["t"]).owning(&[], 5),
        ];
        let a = Assignor::CooperativeSticky.assign(&members, &t);
        assert_eq!(
            (said(&a, "a"), said(&a, "b"), said(&a, "c")),
            ("".into(), "tp1".into(), "".into())
        );
        let members = [
            Member::new("a", &["t"]).owning(&[("t", 1)], 5),
            Member::new("b", &["t"]).owning(&[("t", 0)], 4),
            Member::new("c", &["t"]).owning(&[("t", 0)], 3),
        ];
        let a = Assignor::CooperativeSticky.assign(&members, &t);
        assert_eq!(
            (said(&a, "a"), said(&a, "b"), said(&a, "c")),
            ("tp1".into(), "".into(), "".into())
        );
        let members = [
            Member::new("a", &["t"]).owning(&[("t", 1), ("t", 0)], 5),
            Member::new("b", &["t"]).owning(&[("t", 0)], 4),
        ];
        // a keeps its share (tp0); tp1 is still a's, so b gets it only in the next round.
        let a = Assignor::CooperativeSticky.assign(&members, &t);
        assert_eq!((said(&a, "a"), said(&a, "b")), ("tp0".into(), "".into()));
        let members = [
            Member::new("a", &["t"]).owning(&[("t", 0)], 5),
            Member::new("b", &["t"]).owning(&[("t", 0)], 5),
        ];
        let a = Assignor::CooperativeSticky.assign(&members, &t);
        assert_eq!((said(&a, "a"), said(&a, "b")), ("".into(), "tp1".into()));
        // A claim on a topic not subscribed to, or a partition the topic lacks, is no claim.
        let members = [
            Member::new("a", &["t"]).owning(&[("t", 9), ("u", 0)], 5),
            Member::new("b", &["t"]),
        ];
        let a = Assignor::CooperativeSticky.assign(&members, &t);
        assert_eq!((said(&a, "a"), said(&a, "b")), ("tp0".into(), "tp1".into()));
    }
}
