use super::*;

/// An assignment as SyncGroup carries it: one versioned `ConsumerProtocolAssignment` per member.
pub(super) fn encode_assignment(
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

/// A member as its JoinGroup metadata says (ConsumerProtocolSubscription, any version: a newer
/// one is read as the newest known, as Java reads it): the topics it subscribes to, the
/// partitions it owns (v1+) and their generation (v2+; before, the 4 bytes of user data
/// cooperative-sticky keeps it in, as Java's `CooperativeStickyAssignor` reads it).
pub(super) fn decode_subscription(bytes: &Bytes, member: &str) -> Result<Member, ClientError> {
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
    let topics: Vec<String> = subscription.topics.iter().map(|t| t.to_string()).collect();
    let topics: Vec<&str> = topics.iter().map(String::as_str).collect();
    let mut out = Member::new(member, &topics);
    for t in &subscription.owned_partitions {
        out.owned
            .entry(t.topic.0.to_string())
            .or_default()
            .extend(&t.partitions);
    }
    out.generation = match (version, subscription.user_data.as_deref()) {
        (2.., _) => subscription.generation_id,
        (_, Some([a, b, c, d])) => i32::from_be_bytes([*a, *b, *c, *d]),
        _ => -1,
    };
    Ok(out)
}

/// The consumer protocol's embedded structs: an i16 version, then the struct at that version.
pub(super) fn encode_versioned<T: Encodable>(
    value: &T,
    version: i16,
) -> Result<Bytes, ClientError> {
    let mut buf = BytesMut::new();
    buf.put_i16(version);
    value
        .encode(&mut buf, version)
        .map_err(|e| ClientError::Frame(format!("consumer protocol encoding: {e}")))?;
    Ok(buf.freeze())
}

pub(super) fn decode_assignment(bytes: &Bytes, topic: &str) -> Result<Vec<i32>, ClientError> {
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
            assert_eq!(
                decode_subscription(&bytes, "m").unwrap().topics,
                ["t1", "t2"]
            );
        }
        // What a cooperative member owns, and since when: the v2+ field, or before v2 the
        // generation cooperative-sticky keeps in its user data.
        for (version, generation) in [(1, 7), (3, 9)] {
            let bytes = encode_versioned(
                &ConsumerProtocolSubscription::default()
                    .with_topics(vec![str_bytes("t")])
                    .with_owned_partitions(vec![
                        OwnedTopic::default()
                            .with_topic(topic_name("t"))
                            .with_partitions(vec![2, 0]),
                    ])
                    .with_generation_id(9)
                    .with_user_data(Some(Bytes::copy_from_slice(&7i32.to_be_bytes()))),
                version,
            )
            .unwrap();
            let m = decode_subscription(&bytes, "m").unwrap();
            assert_eq!(m.owned["t"], [2, 0]);
            assert_eq!(m.generation, generation, "v{version}");
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
