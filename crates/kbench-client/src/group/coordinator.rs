use super::*;

/// `group_id`'s committed offsets for `partitions` of `topic`, asked of its `coordinator`
/// (OffsetFetch); a partition with nothing committed is absent.
pub(super) async fn offset_fetch(
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
pub(super) async fn find_coordinator(
    cluster: &Cluster,
    group: &str,
) -> Result<Arc<Connection>, ClientError> {
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
