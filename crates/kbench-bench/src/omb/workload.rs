//! OpenMessaging Benchmark's workload and Kafka driver files, read as OMB documents them: every
//! workload field OMB knows, camelCase, and an unknown field is an error naming it and its line.

use std::path::Path;

use serde::Deserialize;

use crate::produce::sizes::SizeDistribution;

/// OMB's `KeyDistributorType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum KeyDistributor {
    #[default]
    NoKey,
    KeyRoundRobin,
    RandomNano,
}

impl KeyDistributor {
    /// OMB's name.
    pub fn name(self) -> &'static str {
        match self {
            KeyDistributor::NoKey => "NO_KEY",
            KeyDistributor::KeyRoundRobin => "KEY_ROUND_ROBIN",
            KeyDistributor::RandomNano => "RANDOM_NANO",
        }
    }
}

/// An OMB workload file (`workloads/*.yaml`). Numbers OMB reads as integers are read as numbers
/// here, so that a test may run a fraction of a minute (`testDurationMinutes: 0.1`); whole numbers
/// mean what they mean to OMB.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct OmbWorkload {
    pub name: String,
    pub topics: u32,
    pub partitions_per_topic: u32,
    #[serde(default)]
    pub key_distributor: KeyDistributor,
    /// Every record's size; absent when `messageSizeDistribution` gives the sizes.
    #[serde(default)]
    pub message_size: Option<usize>,
    /// OMB's weighted size buckets (OMB PR #443): `"MIN-MAX": WEIGHT`, the bucket's records of
    /// MAX bytes; kbench also takes a plain size as the key.
    #[serde(default)]
    pub message_size_distribution: Option<SizeWeights>,
    #[serde(default)]
    pub use_randomized_payloads: bool,
    #[serde(default)]
    pub random_bytes_ratio: f64,
    #[serde(default)]
    pub randomized_payload_pool_size: u32,
    #[serde(default)]
    pub payload_file: Option<String>,
    pub subscriptions_per_topic: u32,
    pub producers_per_topic: u32,
    pub consumer_per_subscription: u32,
    /// Records/s over every producer; 0: find the highest sustainable rate.
    pub producer_rate: f64,
    #[serde(default, rename = "consumerBacklogSizeGB")]
    pub consumer_backlog_size_gb: f64,
    #[serde(default = "one")]
    pub backlog_drain_ratio: f64,
    pub test_duration_minutes: f64,
    #[serde(default = "one")]
    pub warmup_duration_minutes: f64,
}

fn one() -> f64 {
    1.0
}

/// `messageSizeDistribution` as written: each key (a string such as `"0-256"` or `"1KB-4KB"`, or
/// a number) with its weight, in the file's order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SizeWeights(pub Vec<(String, f64)>);

impl<'de> Deserialize<'de> for SizeWeights {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<SizeWeights, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Key {
            Number(u64),
            Text(String),
        }
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = SizeWeights;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map of sizes (\"MIN-MAX\" or a number of bytes) to weights")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<SizeWeights, A::Error> {
                let mut out = Vec::new();
                while let Some((k, w)) = map.next_entry::<Key, f64>()? {
                    let k = match k {
                        Key::Number(n) => n.to_string(),
                        Key::Text(t) => t,
                    };
                    out.push((k, w));
                }
                Ok(SizeWeights(out))
            }
        }
        d.deserialize_map(Visit)
    }
}

impl SizeWeights {
    /// The sizes and weights, as OMB reads them: a key `MIN-MAX` (each a number of bytes, or with
    /// `B`, `KB`, `MB`: 1024-based) is a bucket whose records are MAX bytes (OMB's "top of range"),
    /// a plain number is that size; weights are at least 0 (a bucket of weight 0 is never drawn)
    /// and add up to more than 0. Buckets of the same size add their weights.
    pub fn distribution(&self) -> Result<SizeDistribution, String> {
        let field = "messageSizeDistribution";
        let mut pairs: Vec<(usize, f64)> = Vec::new();
        for (key, weight) in &self.0 {
            let size = bucket_size(key).map_err(|e| format!("{field} {key:?}: {e}"))?;
            if !(weight.is_finite() && *weight >= 0.0) {
                return Err(format!(
                    "{field} {key:?}: weight {weight} is not a number of at least 0"
                ));
            }
            if *weight == 0.0 {
                continue;
            }
            match pairs.iter_mut().find(|(s, _)| *s == size) {
                Some((_, w)) => *w += weight,
                None => pairs.push((size, *weight)),
            }
        }
        if pairs.is_empty() {
            return Err(format!("{field}: the weights must add up to more than 0"));
        }
        SizeDistribution::new(&pairs).map_err(|e| format!("{field}: {e}"))
    }
}

/// A bucket's record size: MAX of `MIN-MAX`, or a plain size; at least 1 byte.
fn bucket_size(key: &str) -> Result<usize, String> {
    let bytes = |s: &str| -> Result<usize, String> {
        let t = s.trim().to_ascii_uppercase();
        let (digits, unit) = if let Some(d) = t.strip_suffix("KB") {
            (d, 1024)
        } else if let Some(d) = t.strip_suffix("MB") {
            (d, 1024 * 1024)
        } else if let Some(d) = t.strip_suffix('B') {
            (d, 1)
        } else {
            (t.as_str(), 1)
        };
        digits
            .trim()
            .parse::<usize>()
            .ok()
            .and_then(|n| n.checked_mul(unit))
            .ok_or_else(|| format!("{s:?} is not a size (bytes, or with B, KB, MB)"))
    };
    let size = match key.rsplit_once('-') {
        Some((min, max)) => {
            let (min, max) = (bytes(min)?, bytes(max)?);
            if max < min {
                return Err(format!("{max} is below {min}"));
            }
            max
        }
        None => bytes(key)?,
    };
    if size == 0 {
        return Err("a record size is at least 1 byte".into());
    }
    Ok(size)
}

/// OMB's Kafka driver file (`driver-kafka/*.yaml`). The property blocks are Java properties text.
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct OmbDriver {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub driver_class: Option<String>,
    #[serde(default)]
    pub replication_factor: Option<i16>,
    /// Delete the benchmark's topics first (OMB's `reset`): kbench's topics are fresh every run.
    #[serde(default)]
    pub reset: Option<bool>,
    #[serde(default)]
    pub topic_config: Option<String>,
    #[serde(default)]
    pub common_config: Option<String>,
    #[serde(default)]
    pub producer_config: Option<String>,
    #[serde(default)]
    pub consumer_config: Option<String>,
}

/// The one error a bad file gets: the file, then what serde_yaml says (the field and the line).
fn read_yaml<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, String> {
    let text = kbench_client::input::read_text(path, kbench_client::input::CONFIG)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    crate::yaml::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

impl OmbWorkload {
    /// `messageSize`, 0 when the sizes are a distribution.
    pub fn message_size(&self) -> usize {
        self.message_size.unwrap_or(0)
    }

    /// `messageSizeDistribution`, read (checked when the workload was).
    pub fn size_distribution(&self) -> Option<SizeDistribution> {
        self.message_size_distribution
            .as_ref()
            .and_then(|d| d.distribution().ok())
    }

    pub fn read(path: &Path) -> Result<OmbWorkload, String> {
        let w: OmbWorkload = read_yaml(path)?;
        w.check().map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(w)
    }

    pub fn parse(text: &str) -> Result<OmbWorkload, String> {
        let w: OmbWorkload = crate::yaml::parse(text)?;
        w.check()?;
        Ok(w)
    }

    /// The values OMB would fail on later, refused now, each naming its field.
    fn check(&self) -> Result<(), String> {
        let positive = |field: &str, v: u32| {
            if v == 0 {
                Err(format!("{field}: must be at least 1"))
            } else {
                Ok(())
            }
        };
        positive("topics", self.topics)?;
        // The topics every process creates, one after another, whatever its share.
        if u64::from(self.topics) > MAX_TOPICS {
            return Err(format!(
                "topics: {} is above the {MAX_TOPICS} a run creates",
                self.topics
            ));
        }
        positive("partitionsPerTopic", self.partitions_per_topic)?;
        positive("producersPerTopic", self.producers_per_topic)?;
        if self.subscriptions_per_topic > 0 {
            positive("consumerPerSubscription", self.consumer_per_subscription)?;
        }
        match (self.message_size, &self.message_size_distribution) {
            (Some(_), Some(_)) => {
                return Err(
                    "messageSize and messageSizeDistribution: give one of them, not both".into(),
                );
            }
            (None, None) => {
                return Err("messageSize: missing (or give messageSizeDistribution)".into());
            }
            (Some(0), None) if self.payload_file.is_none() => {
                return Err("messageSize: must be at least 1".into());
            }
            (_, Some(d)) => {
                d.distribution()?;
            }
            _ => {}
        }
        let finite = |field: &str, v: f64, min: f64, max: f64| {
            if v.is_finite() && (min..=max).contains(&v) {
                Ok(())
            } else {
                Err(format!("{field}: {v} is outside {min}..={max}"))
            }
        };
        finite("producerRate", self.producer_rate, 0.0, 1e9)?;
        finite("randomBytesRatio", self.random_bytes_ratio, 0.0, 1.0)?;
        finite(
            "consumerBacklogSizeGB",
            self.consumer_backlog_size_gb,
            0.0,
            1e6,
        )?;
        finite("backlogDrainRatio", self.backlog_drain_ratio, 0.0, 1e6)?;
        finite(
            "testDurationMinutes",
            self.test_duration_minutes,
            0.0,
            44_640.0,
        )?;
        finite(
            "warmupDurationMinutes",
            self.warmup_duration_minutes,
            0.0,
            44_640.0,
        )?;
        if self.test_duration_minutes <= 0.0 {
            return Err("testDurationMinutes: must be above zero".into());
        }
        if self.use_randomized_payloads
            && self.randomized_payload_pool_size == 0
            && self.message_size_distribution.is_none()
        {
            return Err(
                "randomizedPayloadPoolSize: must be at least 1 with useRandomizedPayloads".into(),
            );
        }
        let producers = u64::from(self.topics) * u64::from(self.producers_per_topic);
        let consumers = u64::from(self.topics)
            * u64::from(self.subscriptions_per_topic)
            * u64::from(self.consumer_per_subscription);
        // One process runs at most MAX_PROCESS_CLIENTS of them (`OmbSpec::validate`); a run over
        // agents spreads them, up to this many in all.
        if producers + consumers > MAX_WORKLOAD_CLIENTS {
            return Err(format!(
                "topics × (producersPerTopic + subscriptionsPerTopic × consumerPerSubscription): {} clients, above the {MAX_WORKLOAD_CLIENTS} a run spreads over agents",
                producers + consumers
            ));
        }
        Ok(())
    }
}

/// The most topics a workload may create (a single process's bound before runs over agents:
/// every topic has a producer, and one process runs 1 000 clients).
pub const MAX_TOPICS: u64 = 1_000;

/// The most producers and consumers a workload may have in all, spread over agents
/// (`super::MAX_PROCESS_CLIENTS` on each).
pub const MAX_WORKLOAD_CLIENTS: u64 = 100_000;

impl OmbDriver {
    pub fn read(path: &Path) -> Result<OmbDriver, String> {
        read_yaml(path)
    }

    pub fn parse(text: &str) -> Result<OmbDriver, String> {
        crate::yaml::parse(text)
    }
}

/// A Java properties block (`kbench_client::config::parse_properties`); `field` names the block
/// in errors.
pub fn properties(field: &str, text: Option<&str>) -> Result<Vec<(String, String)>, String> {
    kbench_client::config::parse_properties(text.unwrap_or_default())
        .map_err(|e| format!("{field}, line {} of the block: {}", e.line, e.what))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIMPLE: &str = "name: 1 topic / 1 partition / 100b
topics: 1
partitionsPerTopic: 1
messageSize: 100
payloadFile: payload/payload-100b.data
subscriptionsPerTopic: 1
consumerPerSubscription: 1
producersPerTopic: 1
producerRate: 50000
consumerBacklogSizeGB: 0
testDurationMinutes: 15
";

    #[test]
    fn an_omb_workload_reads_with_omb_defaults() {
        let w = OmbWorkload::parse(SIMPLE).unwrap();
        assert_eq!(w.topics, 1);
        assert_eq!(w.producer_rate, 50_000.0);
        assert_eq!(w.key_distributor, KeyDistributor::NoKey);
        assert_eq!(w.warmup_duration_minutes, 1.0);
        assert_eq!(w.payload_file.as_deref(), Some("payload/payload-100b.data"));
        let keyed =
            OmbWorkload::parse(&format!("{SIMPLE}keyDistributor: KEY_ROUND_ROBIN\n")).unwrap();
        assert_eq!(keyed.key_distributor, KeyDistributor::KeyRoundRobin);
    }

    #[test]
    fn an_unknown_field_or_a_bad_type_is_named_with_its_line() {
        let e = OmbWorkload::parse(&SIMPLE.replace("producerRate", "producerRat")).unwrap_err();
        assert!(
            e.contains("unknown field `producerRat`") && e.contains("line 9"),
            "{e}"
        );
        let e = OmbWorkload::parse(&SIMPLE.replace("topics: 1", "topics: one")).unwrap_err();
        assert!(e.contains("topics") && e.contains("line 2"), "{e}");
        let e = OmbWorkload::parse(&format!("{SIMPLE}keyDistributor: HASHED\n")).unwrap_err();
        assert!(e.contains("HASHED") && e.contains("line 12"), "{e}");
        let e =
            OmbWorkload::parse(&SIMPLE.replace("partitionsPerTopic: 1", "partitionsPerTopic: 0"))
                .unwrap_err();
        assert!(e.starts_with("partitionsPerTopic"), "{e}");
        let e = OmbDriver::parse("name: Kafka\nreplicationFactor: 1\nbogus: 2\n").unwrap_err();
        assert!(
            e.contains("unknown field `bogus`") && e.contains("line 3"),
            "{e}"
        );
    }

    /// OMB PR #443's shape (`"MIN-MAX": WEIGHT`, records of MAX bytes, KB/MB 1024-based), and a
    /// plain size as the key, numbers or strings; weights normalised.
    #[test]
    fn a_message_size_distribution_reads_as_omb_writes_it() {
        let text = SIMPLE.replace(
            "messageSize: 100\n",
            "messageSizeDistribution:\n  \"0-256\": 234\n  \"256-1KB\": 456\n  \"1KB-4KB\": 678\n  \"4KB-1MB\": 0\n",
        );
        let w = OmbWorkload::parse(&text).unwrap();
        assert_eq!(w.message_size, None);
        let d = w.size_distribution().unwrap();
        let sizes: Vec<usize> = d.buckets().iter().map(|b| b.size).collect();
        assert_eq!(sizes, [256, 1024, 4096], "a weight of 0 is never drawn");
        assert!((d.buckets()[0].weight - 234.0 / 1368.0).abs() < 1e-12);
        let plain = SIMPLE.replace(
            "messageSize: 100\n",
            "messageSizeDistribution: {100: 70, \"1000\": 25, 10000: 5.0}\n",
        );
        let d = OmbWorkload::parse(&plain)
            .unwrap()
            .size_distribution()
            .unwrap();
        assert_eq!(d.buckets()[1].size, 1000);
        assert!((d.buckets()[0].weight - 0.7).abs() < 1e-12);
    }

    #[test]
    fn a_bad_message_size_distribution_is_named() {
        let with = |dist: &str| SIMPLE.replace("messageSize: 100\n", dist);
        let e = OmbWorkload::parse(&format!("{SIMPLE}messageSizeDistribution: {{100: 1}}\n"))
            .unwrap_err();
        assert!(e.contains("messageSize and messageSizeDistribution"), "{e}");
        let e = OmbWorkload::parse(&with("")).unwrap_err();
        assert!(e.contains("messageSize: missing"), "{e}");
        for (dist, says) in [
            ("{\"0-100\": -1}", "\"0-100\": weight -1"),
            ("{\"0-100\": 0}", "must add up to more than 0"),
            ("{\"100-10\": 1}", "\"100-10\": 10 is below 100"),
            ("{\"a-b\": 1}", "\"a-b\": \"a\" is not a size"),
            ("{\"0-0\": 1}", "at least 1 byte"),
            ("{}", "must add up to more than 0"),
        ] {
            let e = OmbWorkload::parse(&with(&format!("messageSizeDistribution: {dist}\n")))
                .unwrap_err();
            assert!(
                e.starts_with("messageSizeDistribution") && e.contains(says),
                "{dist}: {e}"
            );
        }
        let e = OmbWorkload::parse(&with("messageSizeDistribution: [100]\n")).unwrap_err();
        assert!(e.contains("messageSizeDistribution"), "{e}");
    }

    #[test]
    fn property_blocks_read_as_java_properties() {
        let p = properties(
            "producerConfig",
            Some("acks=all\n# a comment\n\nlinger.ms = 1\nbatch.size: 1048576\n"),
        )
        .unwrap();
        assert_eq!(
            p,
            vec![
                ("acks".into(), "all".into()),
                ("linger.ms".into(), "1".into()),
                ("batch.size".into(), "1048576".into())
            ]
        );
        assert!(properties("commonConfig", Some("novalue\n")).is_err());
    }
}
