//! What a compacted topic must keep (`--latest-values`): the last value of every key, and no key
//! whose last write was a tombstone — kgo-verifier's latest-value map.
//!
//! The writing side ([`LatestWritten`]) keeps, per key, the acknowledged write at the highest
//! offset (a key lives in one partition, so offsets order its writes): its partition, offset and
//! a CRC-32C of its value, or a tombstone; a key with a failed write is *uncertain* (the write may
//! have landed). `kbench produce --latest-values FILE` writes it as a [`LatestFile`]. The reading
//! side ([`LatestChecker`]) reads the topic in offset order, keeps each expected key's last record,
//! and judges: matched (that very record, by partition and offset — compaction keeps offsets —
//! with its value's checksum), missing (a live key never read), stale (another record last),
//! corrupted (the record, another value) and resurrected (deleted, but a value read last). The
//! offset makes the check hold whatever the values are (a fixed payload repeats one value). On a
//! log that was not compacted the check holds as well: a key's last record is still its last
//! write.
//!
//! Memory follows the key space, never the records: one slot per key.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// The file's `kind`.
pub const FILE_KIND: &str = "kbench-latest-values";

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Slot {
    partition: i32,
    /// The offset of the last acknowledged write (-1: none).
    offset: i64,
    /// Its value's CRC-32C; `None`, a tombstone.
    value: Option<u32>,
    uncertain: bool,
}

/// The writing side: per key number, the last acknowledged write.
#[derive(Debug, Clone, Default)]
pub struct LatestWritten {
    keys: Vec<Bytes>,
    slots: Vec<Slot>,
}

impl LatestWritten {
    /// Nothing written yet over `keys` (key number `i` is `keys[i]`).
    pub fn new(keys: Vec<Bytes>) -> LatestWritten {
        let slots = vec![
            Slot {
                offset: -1,
                ..Slot::default()
            };
            keys.len()
        ];
        LatestWritten { keys, slots }
    }

    /// Key `key`'s write at `offset` of `partition` was acknowledged (`value`: the value's
    /// CRC-32C, or `None` for a tombstone). An offset the broker did not give (negative) makes
    /// the key uncertain.
    pub fn acked(&mut self, key: u32, partition: i32, offset: i64, value: Option<u32>) {
        let Some(slot) = self.slots.get_mut(key as usize) else {
            return;
        };
        if offset < 0 {
            slot.uncertain = true;
        } else if offset > slot.offset {
            *slot = Slot {
                partition,
                offset,
                value,
                uncertain: slot.uncertain,
            };
        }
    }

    /// A write of `key` failed: it may have landed, so the key's last value is not known.
    pub fn failed(&mut self, key: u32) {
        if let Some(slot) = self.slots.get_mut(key as usize) {
            slot.uncertain = true;
        }
    }

    /// Another repetition's writes of the same keys, to the same topic.
    pub fn merge(&mut self, other: &LatestWritten) {
        for (mine, theirs) in self.slots.iter_mut().zip(&other.slots) {
            let uncertain = mine.uncertain || theirs.uncertain;
            if theirs.offset > mine.offset {
                *mine = *theirs;
            }
            mine.uncertain = uncertain;
        }
    }

    /// The file for `topic`: every key written, its last write.
    pub fn file(&self, topic: &str) -> LatestFile {
        let mut keys = BTreeMap::new();
        let mut uncertain = Vec::new();
        for (key, slot) in self.keys.iter().zip(&self.slots) {
            if slot.uncertain {
                uncertain.push(key_text(key));
            } else if slot.offset >= 0 {
                keys.insert(
                    key_text(key),
                    LastWrite {
                        partition: slot.partition,
                        offset: slot.offset,
                        value_crc32c: slot.value.map(|c| format!("{c:08x}")),
                    },
                );
            }
        }
        LatestFile {
            kind: FILE_KIND.into(),
            topic: topic.into(),
            keys,
            uncertain,
        }
    }
}

/// `--latest-values FILE`: what a compacted topic must end with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatestFile {
    /// Always [`FILE_KIND`].
    pub kind: String,
    pub topic: String,
    /// Every key whose last write is known, and that write.
    pub keys: BTreeMap<String, LastWrite>,
    /// Keys with a write that failed (it may have landed): not checked.
    pub uncertain: Vec<String>,
}

/// A key's last acknowledged write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LastWrite {
    pub partition: i32,
    pub offset: i64,
    /// The value's CRC-32C (8 hex digits); null, a tombstone.
    pub value_crc32c: Option<String>,
}

impl LastWrite {
    pub fn deleted(&self) -> bool {
        self.value_crc32c.is_none()
    }
}

/// A key as the file writes it: its text when it is UTF-8 (and does not look like the other
/// form), else `hex:` and its bytes in hex.
pub fn key_text(key: &[u8]) -> String {
    match std::str::from_utf8(key) {
        Ok(s) if !s.starts_with("hex:") => s.to_string(),
        _ => format!("hex:{}", hex(key)),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn key_bytes(text: &str) -> Result<Vec<u8>, String> {
    let Some(h) = text.strip_prefix("hex:") else {
        return Ok(text.as_bytes().to_vec());
    };
    if !h.is_ascii() || h.len() % 2 != 0 {
        return Err(format!("key {text:?}: not an even number of hex digits"));
    }
    (0..h.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&h[i..i + 2], 16)
                .map_err(|_| format!("key {text:?}: not hex digits"))
        })
        .collect()
}

/// A record as the check keeps it: where, and its value's checksum (`None`: a tombstone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Record {
    partition: i32,
    offset: i64,
    value: Option<u32>,
}

/// The reading side: each expected key's last value read.
#[derive(Debug)]
pub struct LatestChecker {
    index: HashMap<Vec<u8>, usize>,
    /// Per key: its last write, and the last record read.
    expected: Vec<Record>,
    seen: Vec<Option<Record>>,
    uncertain: u64,
    /// Keyed records whose key the file does not name (another writer's, or an uncertain key's).
    other_records: u64,
}

impl LatestChecker {
    /// The checker for `file`; an error names what in it is malformed.
    pub fn new(file: &LatestFile) -> Result<LatestChecker, String> {
        if file.kind != FILE_KIND {
            return Err(format!(
                "kind is {:?}, not {FILE_KIND:?} (a file `kbench produce --latest-values` wrote)",
                file.kind
            ));
        }
        let mut index = HashMap::with_capacity(file.keys.len());
        let mut expected = Vec::with_capacity(file.keys.len());
        for (key, last) in &file.keys {
            let value = match &last.value_crc32c {
                None => None,
                Some(v) => Some(u32::from_str_radix(v, 16).map_err(|_| {
                    format!("key {key:?}: {v:?} is not a CRC-32C in hex (8 digits)")
                })?),
            };
            if last.offset < 0 || last.partition < 0 {
                return Err(format!("key {key:?}: a negative partition or offset"));
            }
            index.insert(key_bytes(key)?, expected.len());
            expected.push(Record {
                partition: last.partition,
                offset: last.offset,
                value,
            });
        }
        Ok(LatestChecker {
            seen: vec![None; expected.len()],
            index,
            expected,
            uncertain: file.uncertain.len() as u64,
            other_records: 0,
        })
    }

    /// A record read at `offset` of `partition`, in offset order within its partition.
    pub fn record(
        &mut self,
        partition: i32,
        offset: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) {
        let Some(key) = key else { return };
        match self.index.get(key) {
            Some(&i) => {
                let record = Record {
                    partition,
                    offset,
                    value: value.map(crc32c::crc32c),
                };
                // The later of the two, should a partition be read again from an earlier offset.
                if self.seen[i].is_none_or(|s| s.partition != partition || s.offset <= offset) {
                    self.seen[i] = Some(record);
                }
            }
            None => self.other_records += 1,
        }
    }

    pub fn report(&self) -> LatestReport {
        let mut r = LatestReport {
            keys_expected: self.expected.len() as u64,
            keys_deleted: self.expected.iter().filter(|e| e.value.is_none()).count() as u64,
            uncertain: self.uncertain,
            other_records: self.other_records,
            ..LatestReport::default()
        };
        for (e, seen) in self.expected.iter().zip(&self.seen) {
            let Some(s) = seen else {
                // A deleted key may be gone altogether (its tombstone compacted away too).
                if e.value.is_none() {
                    r.matched += 1;
                } else {
                    r.missing += 1;
                }
                continue;
            };
            if (s.partition, s.offset) != (e.partition, e.offset) {
                if e.value.is_none() && s.value.is_some() {
                    r.resurrected += 1;
                } else {
                    r.stale += 1;
                }
            } else if s.value != e.value {
                r.corrupted += 1;
            } else {
                r.matched += 1;
            }
        }
        r.ok = r.missing == 0 && r.stale == 0 && r.resurrected == 0 && r.corrupted == 0;
        r
    }
}

/// What the latest-value check found: the `latest_values` block of a consume result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LatestReport {
    /// Keys the file names, and of them those whose last write was a tombstone.
    pub keys_expected: u64,
    pub keys_deleted: u64,
    /// Keys whose last value read is their last write (a deleted key: absent, or a tombstone).
    pub matched: u64,
    /// Live keys never read.
    pub missing: u64,
    /// Keys whose last record read is not their last write (an earlier one, or a later one the
    /// file does not know).
    pub stale: u64,
    /// Keys whose last write was read with another value.
    pub corrupted: u64,
    /// Deleted keys read last with a value (not the tombstone).
    pub resurrected: u64,
    /// Keys the writer could not be sure of (a failed write): not checked.
    pub uncertain: u64,
    /// Keyed records whose key the file does not name.
    pub other_records: u64,
    /// Nothing missing, stale, corrupted or resurrected.
    pub ok: bool,
}

impl LatestReport {
    /// The one line the CLI prints.
    pub fn line(&self) -> String {
        format!(
            "Latest values {}: {} keys ({} deleted), {} matched, {} missing, {} stale, {} corrupted, {} resurrected, {} uncertain.",
            if self.ok { "OK" } else { "FAILED" },
            self.keys_expected,
            self.keys_deleted,
            self.matched,
            self.missing,
            self.stale,
            self.corrupted,
            self.resurrected,
            self.uncertain
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(n: u32) -> Vec<Bytes> {
        (0..n).map(|i| Bytes::from(format!("k{i}"))).collect()
    }

    #[test]
    fn the_last_write_by_offset_wins_and_the_file_round_trips() {
        let mut w = LatestWritten::new(keys(4));
        w.acked(0, 1, 5, Some(1));
        w.acked(0, 1, 3, Some(2)); // acknowledged later, written earlier
        w.acked(1, 0, 7, Some(3));
        w.acked(1, 0, 9, None); // deleted
        w.failed(2);
        w.acked(2, 0, 4, Some(4));
        // key 3 never written
        let f = w.file("t");
        assert_eq!(f.keys.len(), 2);
        assert_eq!(
            f.keys["k0"],
            LastWrite {
                partition: 1,
                offset: 5,
                value_crc32c: Some("00000001".into())
            }
        );
        assert!(f.keys["k1"].deleted());
        assert_eq!(f.uncertain, vec!["k2".to_string()]);
        let text = serde_json::to_string(&f).unwrap();
        assert_eq!(serde_json::from_str::<LatestFile>(&text).unwrap(), f);
    }

    #[test]
    fn a_log_is_judged_by_each_keys_last_record() {
        let crc = |s: &str| crc32c::crc32c(s.as_bytes());
        let last = |offset: i64, v: Option<&str>| LastWrite {
            partition: 0,
            offset,
            value_crc32c: v.map(|v| format!("{:08x}", crc(v))),
        };
        let file = LatestFile {
            kind: FILE_KIND.into(),
            topic: "t".into(),
            keys: [
                ("a".to_string(), last(1, Some("v"))),
                ("b".to_string(), last(3, None)),
                ("c".to_string(), last(4, Some("v"))),
                ("d".to_string(), last(5, None)),
                ("e".to_string(), last(7, Some("v"))),
                ("f".to_string(), last(8, Some("v"))),
                ("hex:ff00".to_string(), last(9, Some("x"))),
            ]
            .into_iter()
            .collect(),
            uncertain: vec!["z".into()],
        };
        let mut c = LatestChecker::new(&file).unwrap();
        let mut rec =
            |o: i64, k: &[u8], v: Option<&str>| c.record(0, o, Some(k), v.map(str::as_bytes));
        rec(0, b"a", Some("v"));
        rec(1, b"a", Some("v")); // a: its last write
        rec(2, b"b", Some("v"));
        rec(3, b"b", None); // b: deleted, its tombstone kept
        // c: never read (missing); d: deleted and compacted away
        rec(6, b"e", Some("v")); // e: an earlier record last, the same value (stale)
        rec(8, b"f", Some("w")); // f: its last write, another value (corrupted)
        rec(9, &[0xff, 0x00], Some("x"));
        rec(10, b"q", Some("?")); // another writer's
        c.record(0, 11, None, Some(b"unkeyed"));
        let r = c.report();
        assert_eq!(
            (
                r.keys_expected,
                r.keys_deleted,
                r.matched,
                r.missing,
                r.stale,
                r.corrupted
            ),
            (7, 2, 4, 1, 1, 1)
        );
        assert_eq!((r.resurrected, r.uncertain, r.other_records), (0, 1, 1));
        assert!(!r.ok);
        assert!(
            r.line()
                .starts_with("Latest values FAILED: 7 keys (2 deleted), 4 matched")
        );
        // A deleted key read last with a value is resurrected.
        let mut c = LatestChecker::new(&file).unwrap();
        c.record(0, 12, Some(b"d"), Some(b"back"));
        assert_eq!(c.report().resurrected, 1);
    }

    #[test]
    fn a_malformed_file_is_refused_naming_what() {
        let mut f = LatestWritten::new(keys(1)).file("t");
        f.keys.insert(
            "k".into(),
            LastWrite {
                partition: 0,
                offset: 0,
                value_crc32c: Some("xyz".into()),
            },
        );
        assert!(LatestChecker::new(&f).unwrap_err().contains("\"k\""));
        f.kind = "other".into();
        assert!(LatestChecker::new(&f).unwrap_err().contains("kind"));
        assert_eq!(key_text(&[0xff]), "hex:ff");
        assert_eq!(key_text(b"hex:1"), "hex:6865783a31");
        assert_eq!(key_bytes("hex:6865783a31").unwrap(), b"hex:1");
        assert!(key_bytes("hex:aéb").is_err());
    }
}
