//! Request-reply through the user's service (`kbench e2e --reply-topic R`): the producers' records
//! are requests, each with a correlation id in a header; the user's application answers each on the
//! reply topic, copying the id; kbench's consumer reads the replies and times request → reply.
//!
//! The correlation id is text the application copies without reading it:
//! `{run tag:08x}-{producer:08x}-{sequence:016x}-{send time µs:x}`. It names the request (so that
//! duplicates, unmatched replies and requests never answered are counted by the same machinery as
//! e2e's records) and carries its send time on this process's monotonic clock, so that no table of
//! requests in flight grows with the run.
//!
//! Requests also carry Spring Kafka's reply-topic header (`kafka_replyTopic`): a `@KafkaListener`
//! with `@SendTo` answers to it, and copies `kafka_correlationId` (the default correlation header)
//! by itself.

use kbench_wire::RecordView;

use crate::error::SpecError;
use crate::spec::check_topic;

/// The request header the id travels in unless told otherwise: Spring Kafka's
/// `KafkaHeaders.CORRELATION_ID`, which its `ReplyingKafkaTemplate` sets and `@SendTo` copies.
pub const DEFAULT_CORRELATION_HEADER: &str = "kafka_correlationId";
/// Spring Kafka's `KafkaHeaders.REPLY_TOPIC`: where a `@SendTo` listener sends its reply.
pub const REPLY_TOPIC_HEADER: &[u8] = b"kafka_replyTopic";
/// The longest correlation id read from a reply: anything longer is not one of kbench's.
const MAX_ID_LEN: usize = 64;

/// Where a reply carries the request's correlation id.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Correlation {
    /// In this header.
    Header(String),
    /// In this field of the reply's JSON value (a dotted path into nested objects).
    JsonField(String),
}

impl Correlation {
    /// As a user would write it: `header:NAME` or `json:PATH`.
    pub fn describe(&self) -> String {
        match self {
            Correlation::Header(h) => format!("header:{h}"),
            Correlation::JsonField(p) => format!("json:{p}"),
        }
    }
}

impl std::str::FromStr for Correlation {
    type Err = String;
    /// `header:NAME` or `json:PATH` (`json:meta.correlationId`).
    fn from_str(s: &str) -> Result<Self, String> {
        let (kind, name) = s
            .split_once(':')
            .ok_or_else(|| format!("{s:?}: expected header:NAME or json:PATH"))?;
        if name.is_empty() {
            return Err(format!("{s:?}: the name after {kind}: is empty"));
        }
        match kind {
            "header" => Ok(Correlation::Header(name.to_string())),
            "json" => {
                if name.split('.').any(str::is_empty) {
                    return Err(format!("{s:?}: an empty step in the JSON path"));
                }
                Ok(Correlation::JsonField(name.to_string()))
            }
            other => Err(format!(
                "{s:?}: unknown source {other:?} (expected header:NAME or json:PATH)"
            )),
        }
    }
}

/// The request-reply settings of an e2e run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReplySpec {
    /// Where the application writes its replies (kbench's consumer reads it).
    pub topic: String,
    /// The request header that carries the correlation id.
    pub header: String,
    /// Where a reply carries it back (by default the same header).
    pub correlation: Correlation,
    /// The application's consumer group: its lag on the request topic is sampled on the timeline.
    pub app_group: Option<String>,
}

impl ReplySpec {
    /// Replies on `topic`, the id in [`DEFAULT_CORRELATION_HEADER`] both ways, no group watched.
    pub fn new(topic: &str) -> ReplySpec {
        ReplySpec {
            topic: topic.to_string(),
            header: DEFAULT_CORRELATION_HEADER.into(),
            correlation: Correlation::Header(DEFAULT_CORRELATION_HEADER.into()),
            app_group: None,
        }
    }

    /// The settings as a front end collects them (flags, an HTTP body): none without a reply
    /// topic, and then none of the others may be given (the error names the first).
    pub fn of(
        topic: Option<&str>,
        header: Option<&str>,
        correlation: Option<Correlation>,
        app_group: Option<&str>,
    ) -> Result<Option<ReplySpec>, SpecError> {
        let Some(topic) = topic else {
            let given = [
                ("correlation_header", header.is_some()),
                ("reply_correlation", correlation.is_some()),
                ("app_group", app_group.is_some()),
            ];
            return match given.iter().find(|(_, g)| *g) {
                Some((field, _)) => Err(SpecError::new(field, "only with a reply topic")),
                None => Ok(None),
            };
        };
        let mut reply = ReplySpec::new(topic);
        if let Some(h) = header {
            reply.header = h.to_string();
            reply.correlation = Correlation::Header(h.to_string());
        }
        if let Some(c) = correlation {
            reply.correlation = c;
        }
        reply.app_group = app_group.map(str::to_string);
        Ok(Some(reply))
    }

    pub(crate) fn validate(&self, request_topic: &str) -> Result<(), SpecError> {
        check_topic("reply_topic", &self.topic)?;
        if self.topic == request_topic {
            return Err(SpecError::new(
                "reply_topic",
                "must differ from the request topic (kbench would read its own requests as replies)",
            ));
        }
        if self.header.is_empty() || self.header.len() > 255 {
            return Err(SpecError::new(
                "correlation_header",
                "a header name of 1 to 255 bytes",
            ));
        }
        let correlation_ok = match &self.correlation {
            Correlation::Header(h) => !h.is_empty() && h.len() <= 255,
            Correlation::JsonField(p) => !p.is_empty() && !p.split('.').any(str::is_empty),
        };
        if !correlation_ok {
            return Err(SpecError::new(
                "reply_correlation",
                "header:NAME (1 to 255 bytes) or json:PATH",
            ));
        }
        if self.app_group.as_deref().is_some_and(str::is_empty) {
            return Err(SpecError::new("app_group", "must not be empty"));
        }
        Ok(())
    }
}

/// A request's identity and send time, as its correlation id carries them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CorrelationId {
    pub tag: u32,
    pub producer: u32,
    pub seq: u64,
    /// µs since the run's epoch, on this process's monotonic clock.
    pub sent_us: u64,
}

impl CorrelationId {
    /// The id's text into `out` (cleared first).
    pub fn write(&self, out: &mut Vec<u8>) {
        use std::io::Write;
        out.clear();
        let _ = write!(
            out,
            "{:08x}-{:08x}-{:016x}-{:x}",
            self.tag, self.producer, self.seq, self.sent_us
        );
    }

    /// An id kbench wrote; `None` for anything else.
    pub fn parse(text: &[u8]) -> Option<CorrelationId> {
        if text.len() > MAX_ID_LEN {
            return None;
        }
        let text = std::str::from_utf8(text).ok()?;
        let mut parts = text.split('-');
        let mut hex = |len: Option<usize>| {
            let p = parts.next()?;
            if len.is_some_and(|l| p.len() != l) || p.is_empty() || p.len() > 16 {
                return None;
            }
            u64::from_str_radix(p, 16).ok()
        };
        let id = CorrelationId {
            tag: u32::try_from(hex(Some(8))?).ok()?,
            producer: u32::try_from(hex(Some(8))?).ok()?,
            seq: hex(Some(16))?,
            sent_us: hex(None)?,
        };
        parts.next().is_none().then_some(id)
    }
}

/// The correlation id a reply carries where `correlation` says; `None` when it carries none of
/// kbench's (an unmatched reply).
pub fn correlation_of(record: &RecordView<'_>, correlation: &Correlation) -> Option<CorrelationId> {
    match correlation {
        Correlation::Header(name) => record
            .headers()
            .find(|(k, _)| *k == name.as_bytes())
            .and_then(|(_, v)| v)
            .and_then(CorrelationId::parse),
        Correlation::JsonField(path) => {
            let value: serde_json::Value = serde_json::from_slice(record.value?).ok()?;
            let field = path.split('.').try_fold(&value, |v, step| v.get(step))?;
            CorrelationId::parse(field.as_str()?.as_bytes())
        }
    }
}

/// One sample of the application's consumer group lag on the request topic.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LagSample {
    /// Seconds since the load started.
    pub at_s: f64,
    /// Records written to the request topic and not yet committed by the group, over the
    /// partitions it has committed in; `None` when it had committed in none.
    pub lag: Option<u64>,
    /// Partitions of the request topic where the group had committed nothing yet.
    pub partitions_without_commit: usize,
}

/// The application group's lag over the run.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AppLag {
    pub group: String,
    pub samples: Vec<LagSample>,
    /// Samples that could not be taken (the error, and how many times).
    pub errors: std::collections::BTreeMap<String, u64>,
}

impl AppLag {
    /// The largest lag sampled.
    pub fn max(&self) -> Option<u64> {
        self.samples.iter().filter_map(|s| s.lag).max()
    }

    /// The last lag sampled.
    pub fn last(&self) -> Option<u64> {
        self.samples.iter().rev().find_map(|s| s.lag)
    }
}

/// The lag of a group on a topic: `ends` (each partition's latest offset) less `committed`; the
/// partitions with no commit are counted apart.
pub fn lag_of(
    ends: &std::collections::BTreeMap<i32, i64>,
    committed: &std::collections::BTreeMap<i32, i64>,
) -> (Option<u64>, usize) {
    let mut lag = None::<u64>;
    let mut without = 0;
    for (p, end) in ends {
        match committed.get(p) {
            Some(c) => *lag.get_or_insert(0) += (end - c).max(0) as u64,
            None => without += 1,
        }
    }
    (lag, without)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_nothing_else_parses() {
        let id = CorrelationId {
            tag: 0xdead_beef,
            producer: 7,
            seq: 1 << 40,
            sent_us: 123_456_789,
        };
        let mut text = Vec::new();
        id.write(&mut text);
        assert_eq!(
            std::str::from_utf8(&text).unwrap(),
            "deadbeef-00000007-0000010000000000-75bcd15"
        );
        assert_eq!(CorrelationId::parse(&text), Some(id));
        for bad in [
            &b""[..],
            b"nope",
            b"deadbeef-00000007-0000010000000000",
            b"deadbeef-00000007-0000010000000000-75bcd15-1",
            b"deadbee-00000007-0000010000000000-75bcd15",
            b"deadbeef-00000007-0000010000000000-",
            b"deadbeeg-00000007-0000010000000000-1",
            b"deadbeef-00000007-0000010000000000-11111111111111111",
        ] {
            assert_eq!(CorrelationId::parse(bad), None, "{bad:?}");
        }
        // A UUID (a correlation id kbench did not write) is not one of kbench's.
        assert_eq!(
            CorrelationId::parse(b"123e4567-e89b-12d3-a456-426614174000"),
            None
        );
    }

    #[test]
    fn correlation_sources_parse_and_refuse() {
        assert_eq!(
            "header:x-corr".parse::<Correlation>(),
            Ok(Correlation::Header("x-corr".into()))
        );
        assert_eq!(
            "json:meta.id".parse::<Correlation>(),
            Ok(Correlation::JsonField("meta.id".into()))
        );
        for bad in ["x-corr", "header:", "json:a..b", "body:id"] {
            assert!(bad.parse::<Correlation>().is_err(), "{bad}");
        }
    }

    #[test]
    fn ids_are_found_in_a_header_or_a_json_field() {
        use kbench_wire::BatchDecoder;
        use kbench_wire::batch::{RecordBatchBuilder, RecordHeader, now_ms};
        let id = CorrelationId {
            tag: 1,
            producer: 2,
            seq: 3,
            sent_us: 4,
        };
        let mut text = Vec::new();
        id.write(&mut text);
        let json = format!(
            r#"{{"meta":{{"id":"{}"}}}}"#,
            std::str::from_utf8(&text).unwrap()
        );
        let mut b = RecordBatchBuilder::new(kbench_wire::Compression::None);
        b.start_now();
        let header = [RecordHeader {
            key: b"corr",
            value: Some(&text),
        }];
        b.append(now_ms(), None, Some(json.as_bytes()), &header);
        b.append(now_ms(), None, Some(b"not json"), &[]);
        let batch = b.finish().unwrap().to_vec();
        let mut found = Vec::new();
        BatchDecoder::new()
            .decode_all(&batch, |_, r| {
                found.push((
                    correlation_of(&r, &Correlation::Header("corr".into())),
                    correlation_of(&r, &Correlation::JsonField("meta.id".into())),
                    correlation_of(&r, &Correlation::JsonField("meta".into())),
                ))
            })
            .unwrap();
        assert_eq!(found, vec![(Some(id), Some(id), None), (None, None, None)]);
    }

    #[test]
    fn lag_counts_only_partitions_with_a_commit() {
        let ends = [(0, 10), (1, 5), (2, 7)].into_iter().collect();
        let committed = [(0, 4), (1, 5)].into_iter().collect();
        assert_eq!(lag_of(&ends, &committed), (Some(6), 1));
        assert_eq!(lag_of(&ends, &Default::default()), (None, 3));
    }

    #[test]
    fn a_reply_topic_is_checked() {
        let ok = ReplySpec::new("replies");
        assert_eq!(ok.validate("requests"), Ok(()));
        assert_eq!(ok.validate("replies").unwrap_err().field, "reply_topic");
        let mut bad = ok.clone();
        bad.app_group = Some(String::new());
        assert_eq!(bad.validate("requests").unwrap_err().field, "app_group");
        let mut bad = ok.clone();
        bad.header.clear();
        assert_eq!(
            bad.validate("requests").unwrap_err().field,
            "correlation_header"
        );
    }
}
