//! Version negotiation and pinning: what the broker offers (its ApiVersions ranges), what kbench
//! implements, what the user pinned, and the version chosen for each API.
//!
//! The rule: for each API use the highest version both sides support, unless pinned; a pin either holds
//! exactly or fails before any load with a message naming the API, the pin and both ranges.

use std::collections::BTreeMap;
use std::fmt;

use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};
use kafka_protocol::protocol::VersionRange;

/// The name Kafka gives an API ("Produce", "CreateTopics"), as used in messages and results.
pub fn api_name(api: ApiKey) -> String {
    format!("{api:?}")
}

/// Find an API by its Kafka name, case-insensitively; `_` and `-` are ignored ("create_topics").
pub fn api_by_name(name: &str) -> Option<ApiKey> {
    let wanted: String = name
        .chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect();
    ApiKey::iter().find(|api| api_name(*api).to_lowercase() == wanted)
}

/// The versions kbench implements for `api`. Produce and Fetch start where Kafka 4.x starts (KIP-896)
/// and where RecordBatch v2 is the only record format; everything else is what `kafka-protocol` encodes.
pub fn kbench_range(api: ApiKey) -> VersionRange {
    let codec = api.valid_versions();
    let floor = match api {
        ApiKey::Produce => 3,
        ApiKey::Fetch => 4,
        _ => codec.min,
    };
    VersionRange {
        min: codec.min.max(floor),
        max: codec.max,
    }
}

/// The broker's supported version range for every API it announced in ApiVersions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ApiRanges(BTreeMap<i16, VersionRange>);

impl ApiRanges {
    pub fn from_response(response: &ApiVersionsResponse) -> Self {
        Self(
            response
                .api_keys
                .iter()
                .map(|k| {
                    let range = VersionRange {
                        min: k.min_version,
                        max: k.max_version,
                    };
                    (k.api_key, range)
                })
                .collect(),
        )
    }

    pub fn get(&self, api: ApiKey) -> Option<VersionRange> {
        self.0.get(&(api as i16)).copied()
    }
}

/// User pins: API → exact version, from `--pin produce=7,fetch=12`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pins(BTreeMap<i16, i16>);

/// A `--pin` value that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--pin {spec:?}: {reason}")]
pub struct PinError {
    pub spec: String,
    pub reason: String,
}

impl Pins {
    /// Parse `api=version[,api=version…]`. API names are Kafka's, case-insensitive.
    pub fn parse(spec: &str) -> Result<Self, PinError> {
        let mut pins = Pins::default();
        pins.extend_from(spec)?;
        Ok(pins)
    }

    /// Add the pins of one more `--pin` value. Pinning an API twice is an error (which one would
    /// hold?), and so is pinning ApiVersions: kbench asks it before anything is negotiated, so a pin
    /// of it could not hold and would be recorded while another version was used.
    pub fn extend_from(&mut self, spec: &str) -> Result<(), PinError> {
        let fail = |reason: String| PinError {
            spec: spec.to_string(),
            reason,
        };
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, version) = part
                .split_once('=')
                .ok_or_else(|| fail(format!("expected API=VERSION, got {part:?}")))?;
            let api = api_by_name(name.trim())
                .ok_or_else(|| fail(format!("unknown Kafka API {:?}", name.trim())))?;
            let version: i16 = version.trim().parse().map_err(|_| {
                fail(format!(
                    "version {:?} for {} is not a whole number",
                    version.trim(),
                    api_name(api)
                ))
            })?;
            if api == ApiKey::ApiVersions {
                return Err(fail(
                    "ApiVersions cannot be pinned: it is asked before any version is chosen".into(),
                ));
            }
            if self.0.insert(api as i16, version).is_some() {
                return Err(fail(format!("{} is pinned twice", api_name(api))));
            }
        }
        if self.0.is_empty() {
            return Err(fail("no API=VERSION given".into()));
        }
        Ok(())
    }

    pub fn get(&self, api: ApiKey) -> Option<i16> {
        self.0.get(&(api as i16)).copied()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `Err` naming the first pinned API that is not among `used`: a pin of an API the command never
    /// sends would be recorded while nothing held it.
    pub fn only(&self, used: &[ApiKey]) -> Result<(), PinError> {
        match self.iter().find(|(api, _)| !used.contains(api)) {
            None => Ok(()),
            Some((api, v)) => Err(PinError {
                spec: format!("{}={v}", api_name(api).to_lowercase()),
                reason: format!(
                    "this command does not use {} (it uses {})",
                    api_name(api),
                    used.iter()
                        .map(|a| api_name(*a))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }),
        }
    }

    /// The pinned APIs, in API-key order.
    pub fn iter(&self) -> impl Iterator<Item = (ApiKey, i16)> + '_ {
        self.0
            .iter()
            .filter_map(|(k, v)| ApiKey::try_from(*k).ok().map(|api| (api, *v)))
    }
}

/// Why no version can be used for an API.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum VersionError {
    #[error("the broker does not support the {api} API at all (kbench supports v{kbench})")]
    NotOffered { api: String, kbench: VersionRange },
    #[error("the broker supports {api} v{broker} and kbench v{kbench}: no version in common")]
    NoOverlap {
        api: String,
        broker: VersionRange,
        kbench: VersionRange,
    },
    #[error(
        "--pin {pin_api}={pin}: {api} v{pin} addresses topics by id, and the broker gave this topic none (the zero UUID in Metadata); {api} v12 and earlier address it by name"
    )]
    PinNeedsTopicId {
        pin_api: String,
        api: String,
        pin: i16,
    },
    #[error(
        "--pin {pin_api}={pin}: {api} v{pin} is not possible here (broker supports {api} v{broker}, kbench supports {api} v{kbench})"
    )]
    PinOutOfRange {
        pin_api: String,
        api: String,
        pin: i16,
        broker: String,
        kbench: VersionRange,
    },
}

/// The first version of `api` that addresses topics by id only (KIP-516): Produce v13, Fetch v13.
pub fn first_topic_id_version(api: ApiKey) -> Option<i16> {
    match api {
        ApiKey::Produce | ApiKey::Fetch => Some(13),
        _ => None,
    }
}

/// Choose the version for a request about a topic the broker gave no id (the zero UUID in
/// Metadata: some Kafka-compatible brokers never assign ids): below the first version that
/// addresses topics by id, as Java's client caps Fetch at v12 then. A pin at or above it cannot
/// hold, and says why.
pub fn choose_by_name(api: ApiKey, broker: &ApiRanges, pins: &Pins) -> Result<i16, VersionError> {
    let Some(first_by_id) = first_topic_id_version(api) else {
        return choose(api, broker, pins);
    };
    if let Some(pin) = pins.get(api)
        && pin >= first_by_id
    {
        return Err(VersionError::PinNeedsTopicId {
            pin_api: api_name(api).to_lowercase(),
            api: api_name(api),
            pin,
        });
    }
    let cap = first_by_id - 1;
    choose_within(api, broker, pins, cap)
}

/// Choose the version for `api`: the pin if it is inside both ranges, else the highest common version.
pub fn choose(api: ApiKey, broker: &ApiRanges, pins: &Pins) -> Result<i16, VersionError> {
    choose_within(api, broker, pins, i16::MAX)
}

/// Whether `version` of `api` is flexible (compact strings and tagged fields, KIP-482): its
/// request header is v2.
pub fn is_flexible(api: ApiKey, version: i16) -> bool {
    api.request_header_version(version) >= 2
}

/// The highest version of `api` before its first flexible one (`None`: every version is).
pub fn last_rigid_version(api: ApiKey) -> Option<i16> {
    let range = api.valid_versions();
    (range.min..=range.max)
        .take_while(|v| !is_flexible(api, *v))
        .last()
}

/// [`choose`], kbench's range ending at `cap` (a pin above it cannot hold).
pub fn choose_within(
    api: ApiKey,
    broker: &ApiRanges,
    pins: &Pins,
    cap: i16,
) -> Result<i16, VersionError> {
    let mut kbench = kbench_range(api);
    kbench.max = kbench.max.min(cap);
    let name = api_name(api);
    let offered = broker.get(api);
    if let Some(pin) = pins.get(api) {
        let in_broker = offered.is_some_and(|r| r.min <= pin && pin <= r.max);
        let in_kbench = kbench.min <= pin && pin <= kbench.max;
        if in_broker && in_kbench {
            return Ok(pin);
        }
        return Err(VersionError::PinOutOfRange {
            pin_api: name.to_lowercase(),
            api: name,
            pin,
            broker: offered.map_or_else(|| "none".to_string(), |r| r.to_string()),
            kbench,
        });
    }
    let broker_range = offered.ok_or(VersionError::NotOffered {
        api: name.clone(),
        kbench,
    })?;
    let common = broker_range.intersect(&kbench);
    if common.is_empty() {
        return Err(VersionError::NoOverlap {
            api: name,
            broker: broker_range,
            kbench,
        });
    }
    Ok(common.max)
}

/// The versions chosen on a connection, per API: what every result reports as "negotiated".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Negotiated(BTreeMap<i16, i16>);

impl Negotiated {
    pub fn insert(&mut self, api: ApiKey, version: i16) {
        self.0.insert(api as i16, version);
    }

    pub fn get(&self, api: ApiKey) -> Option<i16> {
        self.0.get(&(api as i16)).copied()
    }

    /// Merge the versions used on another connection. A disagreement is kept as the lowest version,
    /// which `agrees_with` then exposes.
    pub fn merge(&mut self, other: &Negotiated) {
        for (k, v) in &other.0 {
            let e = self.0.entry(*k).or_insert(*v);
            *e = (*e).min(*v);
        }
    }

    /// `(API name, version)` pairs in API-key order.
    pub fn named(&self) -> impl Iterator<Item = (String, i16)> + '_ {
        self.0
            .iter()
            .filter_map(|(k, v)| ApiKey::try_from(*k).ok().map(|api| (api_name(api), *v)))
    }
}

impl fmt::Display for Negotiated {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.named().map(|(n, v)| format!("{n} v{v}")).collect();
        f.write_str(&parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::api_versions_response::ApiVersion;

    #[test]
    fn a_topic_without_an_id_is_addressed_by_name_at_v12_at_most() {
        let b = broker(&[(ApiKey::Fetch, 4, 17), (ApiKey::Produce, 3, 12)]);
        assert_eq!(choose_by_name(ApiKey::Fetch, &b, &Pins::default()), Ok(12));
        assert_eq!(choose(ApiKey::Fetch, &b, &Pins::default()), Ok(17));
        assert_eq!(
            choose_by_name(ApiKey::Produce, &b, &Pins::default()),
            Ok(12)
        );
        let pinned = Pins::parse("fetch=13").unwrap();
        let err = choose_by_name(ApiKey::Fetch, &b, &pinned).unwrap_err();
        assert!(err.to_string().contains("zero UUID"), "{err}");
        assert_eq!(
            choose_by_name(ApiKey::Fetch, &b, &Pins::parse("fetch=12").unwrap()),
            Ok(12)
        );
    }

    #[test]
    fn flexible_versions_are_known_per_api() {
        assert!(!is_flexible(ApiKey::JoinGroup, 5));
        assert!(is_flexible(ApiKey::JoinGroup, 6));
        assert_eq!(last_rigid_version(ApiKey::JoinGroup), Some(5));
        assert_eq!(last_rigid_version(ApiKey::SyncGroup), Some(3));
        assert_eq!(last_rigid_version(ApiKey::Produce), Some(8));
    }

    fn broker(ranges: &[(ApiKey, i16, i16)]) -> ApiRanges {
        let mut response = ApiVersionsResponse::default();
        for (api, min, max) in ranges {
            response.api_keys.push(
                ApiVersion::default()
                    .with_api_key(*api as i16)
                    .with_min_version(*min)
                    .with_max_version(*max),
            );
        }
        ApiRanges::from_response(&response)
    }

    #[test]
    fn highest_common_version_wins_without_a_pin() {
        let b = broker(&[(ApiKey::Produce, 0, 11), (ApiKey::Fetch, 0, 17)]);
        assert_eq!(choose(ApiKey::Produce, &b, &Pins::default()), Ok(11));
        assert_eq!(choose(ApiKey::Fetch, &b, &Pins::default()), Ok(17));
    }

    #[test]
    fn kbench_floor_is_produce_3_and_fetch_4() {
        assert_eq!(kbench_range(ApiKey::Produce).min, 3);
        assert_eq!(kbench_range(ApiKey::Produce).max, 13);
        assert_eq!(kbench_range(ApiKey::Fetch).min, 4);
        assert_eq!(kbench_range(ApiKey::Fetch).max, 18);
    }

    #[test]
    fn pin_inside_both_ranges_holds() {
        let b = broker(&[(ApiKey::Produce, 0, 11)]);
        let pins = Pins::parse("PRODUCE=7").unwrap();
        assert_eq!(choose(ApiKey::Produce, &b, &pins), Ok(7));
    }

    #[test]
    fn pin_outside_broker_range_names_api_pin_and_both_ranges() {
        let b = broker(&[(ApiKey::Produce, 0, 11)]);
        let pins = Pins::parse("produce=12").unwrap();
        let err = choose(ApiKey::Produce, &b, &pins).unwrap_err().to_string();
        assert!(err.contains("--pin produce=12"), "{err}");
        assert!(err.contains("broker supports Produce v0..11"), "{err}");
        assert!(err.contains("kbench supports Produce v3..13"), "{err}");
    }

    #[test]
    fn pin_below_kbench_floor_fails() {
        let b = broker(&[(ApiKey::Produce, 0, 11)]);
        let pins = Pins::parse("produce=2").unwrap();
        assert!(choose(ApiKey::Produce, &b, &pins).is_err());
    }

    #[test]
    fn pins_parse_names_case_insensitively_and_reject_garbage() {
        let pins = Pins::parse("produce=7, Fetch=12,create_topics=5").unwrap();
        assert_eq!(pins.get(ApiKey::Produce), Some(7));
        assert_eq!(pins.get(ApiKey::Fetch), Some(12));
        assert_eq!(pins.get(ApiKey::CreateTopics), Some(5));
        assert!(
            Pins::parse("produce")
                .unwrap_err()
                .to_string()
                .contains("API=VERSION")
        );
        assert!(
            Pins::parse("nosuch=1")
                .unwrap_err()
                .to_string()
                .contains("unknown Kafka API")
        );
        assert!(
            Pins::parse("fetch=x")
                .unwrap_err()
                .to_string()
                .contains("not a whole number")
        );
    }

    #[test]
    fn api_the_broker_lacks_is_an_error() {
        let b = broker(&[(ApiKey::Fetch, 0, 17)]);
        assert!(matches!(
            choose(ApiKey::Produce, &b, &Pins::default()),
            Err(VersionError::NotOffered { .. })
        ));
    }

    #[test]
    fn api_versions_duplicates_and_unused_apis_cannot_be_pinned() {
        let e = Pins::parse("apiversions=0").unwrap_err().to_string();
        assert!(e.contains("ApiVersions cannot be pinned"), "{e}");
        let e = Pins::parse("produce=7,produce=8").unwrap_err().to_string();
        assert!(e.contains("pinned twice"), "{e}");
        let mut pins = Pins::parse("produce=7").unwrap();
        assert!(
            pins.extend_from("produce=9").is_err(),
            "twice across --pin flags too"
        );
        let pins = Pins::parse("fetch=4").unwrap();
        let e = pins
            .only(&[ApiKey::Produce, ApiKey::Metadata])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--pin \"fetch=4\"") && e.contains("does not use Fetch"),
            "{e}"
        );
        assert!(pins.only(&[ApiKey::Fetch]).is_ok());
    }
}
