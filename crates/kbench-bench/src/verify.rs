//! Verification in the same run as the figures (`--verify`): every record written carries a stamp —
//! its producer's id, its sequence number within (producer, partition), and a CRC-32C of its value —
//! in one header, [`VERIFY_HEADER`]. The reading side checks, per partition, that offsets only go up
//! and that each producer's sequence arrives in order, and counts what was lost (acknowledged, never
//! read), duplicated, reordered, corrupted (checksum mismatch), unexpected (read, never
//! acknowledged) and foreign (no stamp of this run).
//!
//! Memory is bounded by gaps, not by values: acknowledged and read offsets are [`RangeSet`]s per
//! partition (one range each when nothing is lost), sequences seen are a [`RangeSet`] per
//! (producer, partition), and at most [`MAX_STREAMS`] such streams are tracked.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use std::sync::Arc;

use kbench_client::{Cluster, Consumer, ConsumerOptions, OffsetReset, TopicLayout};
use kbench_wire::records::{BatchDecoder, RecordView};
use serde::Serialize;

use crate::ranges::RangeSet;

/// The stamp's header key.
pub const VERIFY_HEADER: &[u8] = b"kbench-verify";
/// The stamp: producer id (u64), sequence (u64), CRC-32C of the value (u32), big-endian.
pub const STAMP_LEN: usize = 20;
/// The most (producer, partition) streams tracked; records of streams past it are counted
/// `untracked`, not checked.
pub const MAX_STREAMS: usize = 1 << 16;

/// A record's stamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub producer: u64,
    pub sequence: u64,
    pub crc: u32,
}

impl Stamp {
    /// The stamp for `value`, written as the header's value.
    pub fn encode(producer: u64, sequence: u64, value: &[u8]) -> [u8; STAMP_LEN] {
        let mut out = [0u8; STAMP_LEN];
        out[0..8].copy_from_slice(&producer.to_be_bytes());
        out[8..16].copy_from_slice(&sequence.to_be_bytes());
        out[16..20].copy_from_slice(&crc32c::crc32c(value).to_be_bytes());
        out
    }

    /// A header value read back; `None` when it is not a stamp's length.
    pub fn decode(bytes: &[u8]) -> Option<Stamp> {
        let b: &[u8; STAMP_LEN] = bytes.try_into().ok()?;
        Some(Stamp {
            producer: u64::from_be_bytes(b[0..8].try_into().ok()?),
            sequence: u64::from_be_bytes(b[8..16].try_into().ok()?),
            crc: u32::from_be_bytes(b[16..20].try_into().ok()?),
        })
    }

    /// The stamp of a record, if it carries one (the first [`VERIFY_HEADER`]).
    pub fn of(record: &RecordView<'_>) -> Option<Stamp> {
        record
            .headers()
            .find(|(k, _)| *k == VERIFY_HEADER)
            .and_then(|(_, v)| v)
            .and_then(Stamp::decode)
    }
}

/// A producer id for one run of one process: its wall clock and pid mixed, so that two runs (or two
/// agents) writing to one topic never share one.
pub fn new_producer_id() -> u64 {
    let mut x = crate::clock::wall_us() ^ (u64::from(std::process::id()) << 40);
    // splitmix64's finaliser: nearby inputs give unrelated ids.
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The writing side: which sequence numbers of which (producer, partition) the broker
/// acknowledged. By sequence, not offset: a broker that restarts empty hands out offsets again, and
/// a sequence number still names one record.
#[derive(Debug, Clone, Default)]
pub struct Written {
    /// The producers that wrote (one per run; repetitions add theirs).
    pub producers: Vec<u64>,
    /// Acknowledged sequence numbers per (producer, partition); transactional, of committed
    /// transactions only.
    pub acked: BTreeMap<(u64, i32), RangeSet>,
    /// Transactional: the open transaction's acknowledged sequence numbers, until it ends
    /// ([`Written::settle`]); a transaction whose EndTxn never answered stays here, neither
    /// expected nor forbidden.
    pub pending: BTreeMap<(u64, i32), RangeSet>,
    /// Transactional: the acknowledged sequence numbers of aborted transactions, which a
    /// `read_committed` reader must never see.
    pub aborted: BTreeMap<(u64, i32), RangeSet>,
    /// Written in transactions: acknowledgements wait in `pending` for the transaction's end, and
    /// the topic is read back `read_committed`.
    pub transactional: bool,
}

/// [`Written`]'s acknowledged records as they travel between processes (`e2e --verify` over
/// agents: each producer agent's, through the coordinator, to the consumer's agent): the
/// producers, and per producer and partition the ranges of sequence numbers ([`RangeSet::iter`]'s).
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct WrittenWire {
    pub producers: Vec<u64>,
    pub acked: Vec<AckedRanges>,
}

/// One producer's acknowledged sequence numbers in one partition: (producer, partition, ranges).
pub type AckedRanges = (u64, i32, Vec<(u64, u64)>);

impl Written {
    /// The acknowledged records, to send ([`Written::add_wire`] takes them in).
    pub fn wire(&self) -> WrittenWire {
        WrittenWire {
            producers: self.producers.clone(),
            acked: self
                .acked
                .iter()
                .map(|((producer, partition), r)| (*producer, *partition, r.iter().collect()))
                .collect(),
        }
    }

    /// Another process's acknowledged records, added.
    pub fn add_wire(&mut self, w: &WrittenWire) {
        self.producers.extend(&w.producers);
        for (producer, partition, ranges) in &w.acked {
            let mine = self.acked.entry((*producer, *partition)).or_default();
            for (s, e) in ranges {
                mine.insert_range(*s, *e);
            }
        }
    }

    pub fn for_producer(producer: u64) -> Written {
        Written {
            producers: vec![producer],
            ..Written::default()
        }
    }

    /// A transactional producer's writes: see [`Written::settle`].
    pub fn transactional(producer: u64) -> Written {
        Written {
            transactional: true,
            ..Written::for_producer(producer)
        }
    }

    /// A batch of `count` records, sequence numbers from `first_seq`, acknowledged (transactional:
    /// pending until its transaction ends).
    pub fn ack(&mut self, producer: u64, partition: i32, first_seq: u64, count: u64) {
        let into = if self.transactional {
            &mut self.pending
        } else {
            &mut self.acked
        };
        into.entry((producer, partition))
            .or_default()
            .insert_range(first_seq, first_seq + count);
    }

    /// The open transaction ended (EndTxn answered): its records committed, or aborted.
    pub fn settle(&mut self, committed: bool) {
        let into = if committed {
            &mut self.acked
        } else {
            &mut self.aborted
        };
        add_all(into, &std::mem::take(&mut self.pending));
    }

    pub fn acked_total(&self) -> u64 {
        self.acked.values().map(RangeSet::len).sum::<u64>()
    }

    /// Acknowledged records of aborted transactions.
    pub fn aborted_total(&self) -> u64 {
        self.aborted.values().map(RangeSet::len).sum::<u64>()
    }

    /// Another repetition's writes, added.
    pub fn merge(&mut self, other: &Written) {
        self.producers.extend(&other.producers);
        self.transactional |= other.transactional;
        add_all(&mut self.acked, &other.acked);
        add_all(&mut self.pending, &other.pending);
        add_all(&mut self.aborted, &other.aborted);
    }
}

/// Every range of `from` into `into`.
fn add_all(into: &mut BTreeMap<(u64, i32), RangeSet>, from: &BTreeMap<(u64, i32), RangeSet>) {
    for (k, r) in from {
        let mine = into.entry(*k).or_default();
        for (s, e) in r.iter() {
            mine.insert_range(s, e);
        }
    }
}

#[derive(Debug, Default)]
struct Stream {
    next: u64,
    seen: RangeSet,
    /// Read committed: sequences of aborted transactions the reader passed over (not gaps).
    passed: RangeSet,
    /// The lowest sequence read: where a reader that did not start at the beginning begins.
    first: u64,
}

#[derive(Debug, Default)]
struct PartitionRead {
    last_offset: Option<i64>,
    read: RangeSet,
}

/// The reading side's checks, record by record.
#[derive(Debug, Default)]
pub struct Verifier {
    /// Only these producers' records are this run's (empty: any stamped record is).
    producers: HashSet<u64>,
    partitions: BTreeMap<i32, PartitionRead>,
    streams: HashMap<(u64, i32), Stream>,
    read: u64,
    stamped: u64,
    reordered: u64,
    corrupted: u64,
    foreign: u64,
    untracked: u64,
    offset_regressions: u64,
    /// Read committed: stamped records of aborted transactions passed over.
    aborted_skipped: u64,
}

impl Verifier {
    /// Checks any stamped record (a consumer reading what other runs wrote).
    pub fn any_producer() -> Verifier {
        Verifier::default()
    }

    /// Checks the records of `producers` only; others are foreign.
    pub fn for_producers(producers: &[u64]) -> Verifier {
        Verifier {
            producers: producers.iter().copied().collect(),
            ..Verifier::default()
        }
    }

    /// One record read from `partition`; `false` when it is a duplicate of a record read before
    /// (its producer and sequence seen already).
    pub fn check(
        &mut self,
        partition: i32,
        offset: i64,
        stamp: Option<Stamp>,
        value: &[u8],
    ) -> bool {
        self.read += 1;
        let p = self.partitions.entry(partition).or_default();
        if p.last_offset.is_some_and(|last| offset <= last) {
            tracing::debug!(partition, offset, last = ?p.last_offset, "offset regression");
            self.offset_regressions += 1;
        }
        p.last_offset = Some(offset);
        if offset >= 0 {
            p.read.insert(offset as u64);
        }
        let Some(stamp) = stamp else {
            self.foreign += 1;
            return true;
        };
        if !self.producers.is_empty() && !self.producers.contains(&stamp.producer) {
            self.foreign += 1;
            return true;
        }
        self.stamped += 1;
        if crc32c::crc32c(value) != stamp.crc {
            self.corrupted += 1;
        }
        let full = self.streams.len() >= MAX_STREAMS;
        let stream = match self.streams.get_mut(&(stamp.producer, partition)) {
            Some(s) => s,
            None if full => {
                self.untracked += 1;
                return true;
            }
            None => self
                .streams
                .entry((stamp.producer, partition))
                .or_insert(Stream {
                    first: stamp.sequence,
                    ..Stream::default()
                }),
        };
        if !stream.seen.insert(stamp.sequence) {
            return false; // a duplicate: counted at the end, as stamped − unique
        }
        stream.first = stream.first.min(stamp.sequence);
        if stamp.sequence < stream.next {
            self.reordered += 1;
        } else {
            stream.next = stamp.sequence + 1;
        }
        true
    }

    /// `partition` changes hands in a group: its next reader starts where the group last
    /// committed, so its offsets start again below where the last reader was (a re-read across
    /// the handover, counted as duplicates), not a regression.
    pub fn handover(&mut self, partition: i32) {
        if let Some(p) = self.partitions.get_mut(&partition) {
            p.last_offset = None;
        }
    }

    /// A record of an aborted transaction that a `read_committed` reader passed over (the broker
    /// listed its transaction as aborted): not read, and not a gap in its producer's sequence.
    pub fn passed_over(&mut self, partition: i32, stamp: Option<Stamp>) {
        let Some(stamp) = stamp else { return };
        if !self.producers.is_empty() && !self.producers.contains(&stamp.producer) {
            return;
        }
        // Counted once: a group's next reader passes over the same records again after a
        // handover.
        let new = if let Some(s) = self.streams.get_mut(&(stamp.producer, partition)) {
            s.passed.insert(stamp.sequence)
        } else if self.streams.len() < MAX_STREAMS {
            let s = self
                .streams
                .entry((stamp.producer, partition))
                .or_insert(Stream {
                    first: stamp.sequence,
                    next: stamp.sequence + 1,
                    ..Stream::default()
                });
            s.passed.insert(stamp.sequence)
        } else {
            true
        };
        if new {
            self.aborted_skipped += 1;
        }
    }

    /// The verdict. With `written` (the writing side's acknowledgements), lost and unexpected come
    /// from acknowledged offsets; without, lost is the gaps in each producer's sequences.
    pub fn report(&self, written: Option<&Written>) -> VerifyReport {
        let unique: u64 = self.streams.values().map(|s| s.seen.len()).sum();
        let tracked = self.stamped - self.untracked;
        let gaps: u64 = self
            .streams
            .values()
            .map(|s| {
                // A record passed over (of an aborted transaction) is not a gap.
                let held = s.seen.len() + s.passed.count_missing_from(&s.seen);
                match s.seen.max().max(s.passed.max()) {
                    Some(hi) => (hi - s.first + 1).saturating_sub(held),
                    None => 0,
                }
            })
            .sum();
        let empty = RangeSet::new();
        // Records of aborted transactions read: a reader that reads committed must see none.
        let aborted_read = written.map(|w| {
            w.aborted
                .iter()
                .map(|(k, aborted)| {
                    let seen = self.streams.get(k).map_or(&empty, |s| &s.seen);
                    aborted.len() - aborted.count_missing_from(seen)
                })
                .sum::<u64>()
        });
        let (lost, unexpected, acked) = match written {
            Some(w) => {
                let lost: u64 = w
                    .acked
                    .iter()
                    .map(|(k, acked)| {
                        acked.count_missing_from(self.streams.get(k).map_or(&empty, |s| &s.seen))
                    })
                    .sum();
                // Read, and neither acknowledged nor of a transaction whose end is unknown (aborted
                // ones read are counted apart).
                let unexpected: u64 = self
                    .streams
                    .iter()
                    .map(|(k, s)| {
                        let mut known = w.acked.get(k).cloned().unwrap_or_default();
                        for m in [&w.pending, &w.aborted] {
                            for (a, b) in m.get(k).into_iter().flat_map(RangeSet::iter) {
                                known.insert_range(a, b);
                            }
                        }
                        s.seen.count_missing_from(&known)
                    })
                    .sum();
                (Some(lost), Some(unexpected), Some(w.acked_total()))
            }
            None => (None, None, None),
        };
        VerifyReport {
            records_read: self.read,
            records_verified: self.stamped,
            records_acked: acked,
            lost: lost.unwrap_or(gaps),
            lost_from: if lost.is_some() {
                "acknowledged records not read"
            } else {
                "gaps in each producer's sequence"
            }
            .to_string(),
            duplicated: tracked - unique,
            reordered: self.reordered,
            corrupted: self.corrupted,
            unexpected,
            foreign: self.foreign,
            untracked: self.untracked,
            sequence_gaps: gaps,
            offset_regressions: self.offset_regressions,
            records_aborted: written
                .filter(|w| w.transactional)
                .map(Written::aborted_total),
            aborted_read: aborted_read.unwrap_or(0),
            aborted_skipped: self.aborted_skipped,
            producers: self
                .streams
                .keys()
                .map(|(p, _)| *p)
                .collect::<HashSet<_>>()
                .len() as u64,
            ok: None,
            error: None,
        }
        .judged()
    }
}

/// What verification found: one block of the result document (`verification`).
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct VerifyReport {
    /// Records read back, stamped or not.
    pub records_read: u64,
    /// Records read that carry this run's stamp (duplicates included).
    pub records_verified: u64,
    /// Records the writing side had acknowledged (null: a reader with no writer to ask).
    pub records_acked: Option<u64>,
    /// Acknowledged (by sequence number) and never read; without the writer's acknowledgements, the gaps in each
    /// producer's sequence (see `lost_from`).
    pub lost: u64,
    pub lost_from: String,
    /// Read more than once (the same producer and sequence).
    pub duplicated: u64,
    /// Read after a later record of its producer, in one partition.
    pub reordered: u64,
    /// Value does not match its checksum.
    pub corrupted: u64,
    /// Read and never acknowledged (e.g. a request that timed out but was written); null without
    /// the writer's acknowledgements.
    pub unexpected: Option<u64>,
    /// Records without this run's stamp.
    pub foreign: u64,
    /// Records of streams past the tracker's budget: counted, not checked.
    pub untracked: u64,
    /// Sequence numbers never read between a stream's first and last read.
    pub sequence_gaps: u64,
    /// Offsets that did not go up, within a partition.
    pub offset_regressions: u64,
    /// Transactional writes: the acknowledged records of aborted transactions, which a
    /// `read_committed` reader must not see (null: not written in transactions, or no writer to
    /// ask).
    #[serde(default)]
    pub records_aborted: Option<u64>,
    /// Records of aborted transactions that were read: a failure when reading committed.
    #[serde(default)]
    pub aborted_read: u64,
    /// Read committed: stamped records the reader passed over because the broker listed their
    /// transaction as aborted.
    #[serde(default)]
    pub aborted_skipped: u64,
    /// Producers whose records were read.
    pub producers: u64,
    /// Whether nothing was lost, corrupted, reordered or out of order (duplicates are reported,
    /// not failed: acks=all without idempotence duplicates on retries); null when verification
    /// could not finish.
    pub ok: Option<bool>,
    /// Why verification could not finish (the read-back failed or ran out of time).
    pub error: Option<String>,
}

impl VerifyReport {
    fn judged(mut self) -> VerifyReport {
        self.ok = Some(
            self.lost == 0
                && self.corrupted == 0
                && self.reordered == 0
                && self.offset_regressions == 0
                && self.aborted_read == 0
                && self.error.is_none()
                && !self.nothing_verified(),
        );
        self
    }

    /// No record read carried a stamp, though there was something to check (a writer that
    /// acknowledged records, or records read): a verification of nothing is never OK.
    fn nothing_verified(&self) -> bool {
        self.records_verified == 0 && (self.records_read > 0 || self.records_acked != Some(0))
    }

    /// Agents' verifications of one topic as one (`--verify` over agents): each agent stamped its
    /// records with producer ids of its own and read the whole topic back, checking only those, so
    /// the checked counts add exactly. `records_read` is the most any agent read (each read the
    /// whole topic, at its own end), `foreign` what of that no agent's stamp claimed. OK when every
    /// agent's is; unknown when any agent's could not finish (its error, named).
    pub fn merged(reports: &[(&str, &VerifyReport)]) -> Option<VerifyReport> {
        Self::added(reports, true, "agent")
    }

    /// Several topics' verifications as one (`consume --include` matching several): each read
    /// its own topic, so every count adds. Judged as [`VerifyReport::merged`] judges, and failed
    /// when any topic that read records failed.
    pub fn of_topics(reports: &[(&str, &VerifyReport)]) -> Option<VerifyReport> {
        Self::added(reports, false, "topic")
    }

    /// Several agents' verifications of one topic's partitions, each agent its own partitions
    /// (`consume --agents --partition`): every count adds, as for topics, except the producers,
    /// which wrote to every partition: the most any agent saw (at least one agent saw them all
    /// only when each wrote to that agent's partitions; never more than there were).
    pub fn of_partitions(reports: &[(&str, &VerifyReport)]) -> Option<VerifyReport> {
        let producers = reports.iter().map(|(_, r)| r.producers).max()?;
        Self::added(reports, false, "agent").map(|v| VerifyReport { producers, ..v })
    }

    /// `reports` added up; with `each_whole`, each read the same whole topic (what was read, and
    /// an offset regression, counted once: the most of any). `what` names a report in an error.
    fn added(
        reports: &[(&str, &VerifyReport)],
        each_whole: bool,
        what: &str,
    ) -> Option<VerifyReport> {
        let (_, first) = reports.first()?;
        let sum = |f: fn(&VerifyReport) -> u64| reports.iter().map(|(_, r)| f(r)).sum::<u64>();
        let sum_known = |f: fn(&VerifyReport) -> Option<u64>| {
            reports
                .iter()
                .map(|(_, r)| f(r))
                .try_fold(0u64, |a, x| x.map(|x| a + x))
        };
        let most_or_sum = |f: fn(&VerifyReport) -> u64| {
            if each_whole {
                reports.iter().map(|(_, r)| f(r)).max().unwrap_or(0)
            } else {
                sum(f)
            }
        };
        let records_read = most_or_sum(|r| r.records_read);
        let records_verified = sum(|r| r.records_verified);
        let merged = VerifyReport {
            records_read,
            records_verified,
            records_acked: sum_known(|r| r.records_acked),
            lost: sum(|r| r.lost),
            lost_from: first.lost_from.clone(),
            duplicated: sum(|r| r.duplicated),
            reordered: sum(|r| r.reordered),
            corrupted: sum(|r| r.corrupted),
            unexpected: sum_known(|r| r.unexpected),
            foreign: records_read.saturating_sub(records_verified),
            untracked: sum(|r| r.untracked),
            sequence_gaps: sum(|r| r.sequence_gaps),
            offset_regressions: most_or_sum(|r| r.offset_regressions),
            records_aborted: sum_known(|r| r.records_aborted),
            aborted_read: sum(|r| r.aborted_read),
            aborted_skipped: sum(|r| r.aborted_skipped),
            producers: sum(|r| r.producers),
            ok: None,
            error: None,
        };
        Some(
            match reports
                .iter()
                .find_map(|(name, r)| r.error.as_ref().map(|e| format!("{what} {name}: {e}")))
            {
                Some(e) => merged.failed(e),
                // Topics: the sum is OK only when every topic's is — one that read records and
                // verified none fails it, as one topic's run would fail. A topic that read
                // nothing (empty, or the shared target met before its reader had any) is left to
                // the sum's own judgement.
                None if !each_whole
                    && reports
                        .iter()
                        .any(|(_, r)| r.ok == Some(false) && r.records_read > 0) =>
                {
                    VerifyReport {
                        ok: Some(false),
                        ..merged
                    }
                }
                None => merged.judged(),
            },
        )
    }

    /// A verification that could not finish.
    pub fn failed(mut self, error: String) -> VerifyReport {
        self.error = Some(error);
        self.ok = None;
        self
    }

    /// The one summary line the CLI prints.
    pub fn line(&self) -> String {
        let unexpected = self
            .unexpected
            .map_or_else(|| "unknown".to_string(), |n| n.to_string());
        let verdict = match (self.ok, &self.error) {
            (_, Some(e)) => format!("INCOMPLETE ({e})"),
            (Some(true), _) => "OK".into(),
            _ if self.nothing_verified() && self.records_read == 0 => {
                "FAILED (nothing verified: no record was read)".into()
            }
            _ if self.nothing_verified() => {
                "FAILED (nothing verified: no record read carries a kbench-verify stamp)".into()
            }
            _ => "FAILED".into(),
        };
        let aborted = match self.records_aborted {
            Some(n) if self.aborted_read > 0 && self.aborted_skipped == 0 => format!(
                " Transactions: {} of {n} aborted records read: the broker lists no aborted transaction in its Fetch answers (it does not isolate them from read_committed readers).",
                self.aborted_read
            ),
            Some(n) => format!(
                " Transactions: {} of {n} aborted records read, {} passed over.",
                self.aborted_read, self.aborted_skipped
            ),
            None if self.aborted_skipped > 0 => format!(
                " Transactions: {} records of aborted transactions passed over.",
                self.aborted_skipped
            ),
            None => String::new(),
        };
        format!(
            "Verification {verdict}: {} records read, {} verified, {} lost, {} duplicated, {} reordered, {} corrupted, {unexpected} unexpected, {} foreign.{aborted}",
            self.records_read,
            self.records_verified,
            self.lost,
            self.duplicated,
            self.reordered,
            self.corrupted,
            self.foreign
        )
    }
}

/// How long a read-back may take at most, whatever the volume.
pub const READ_BACK_LIMIT: Duration = Duration::from_secs(300);

/// Read `topic` back from `from` (per partition) to the high watermark as it is now, checking every
/// record, and judge against `written`. Read through the consumer engine, so a leader that moves
/// meanwhile is followed. Bounded by [`READ_BACK_LIMIT`]: past it, or on an error, the report says
/// so (`error`) with what was checked until then.
pub async fn read_back(
    cluster: &Arc<Cluster>,
    topic: &TopicLayout,
    from: &BTreeMap<i32, i64>,
    written: &Written,
) -> VerifyReport {
    let mut verifier = Verifier::for_producers(&written.producers);
    if !written.pending.is_empty() {
        // Read committed, the log's stable end waits for that transaction (until its coordinator
        // times it out): not read back rather than a read that stalls.
        return verifier.report(Some(written)).failed(
            "the last transaction's end is unknown (EndTxn did not answer): not read back".into(),
        );
    }
    let partitions: Vec<i32> = from.keys().copied().collect();
    let ends = match cluster.latest_offsets(topic, &partitions).await {
        Ok(e) => e,
        Err(e) => {
            return verifier
                .report(Some(written))
                .failed(format!("reading the end offsets: {e}"));
        }
    };
    // Where each partition is read from: a log that ends below where it ended before the run was
    // truncated or made anew (a broker that restarted empty): read it all.
    let mut next: BTreeMap<i32, i64> = from
        .iter()
        .filter_map(|(&p, &start)| {
            let end = ends.get(&p).copied().unwrap_or(start);
            let offset = if end < start { 0 } else { start };
            (offset < end).then_some((p, offset))
        })
        .collect();
    if next.is_empty() {
        return verifier.report(Some(written));
    }
    let mut consumer = Consumer::new(
        cluster.clone(),
        topic,
        ConsumerOptions {
            partition_max_bytes: 8 * 1024 * 1024,
            max_bytes: 64 * 1024 * 1024,
            max_wait: Duration::from_millis(100),
            read_committed: written.transactional,
            reset: OffsetReset::Earliest,
            retry_backoff: Duration::from_millis(100),
        },
    );
    consumer.assign(&next);
    let deadline = tokio::time::Instant::now() + READ_BACK_LIMIT;
    let mut decoder = BatchDecoder::new();
    let failed = loop {
        if next.is_empty() {
            break None;
        }
        let fetched = match tokio::time::timeout_at(deadline, consumer.poll()).await {
            Ok(Some(f)) => f,
            Ok(None) => break Some("the consumer engine stopped".to_string()),
            Err(_) => {
                let (p, o) = next.iter().next().map_or((0, 0), |(p, o)| (*p, *o));
                break Some(format!(
                    "read-back stopped after {} s at {}-{p} offset {o} of {}",
                    READ_BACK_LIMIT.as_secs(),
                    topic.name,
                    ends.get(&p).copied().unwrap_or(o)
                ));
            }
        };
        if let Some(e) = fetched.errors.first() {
            break Some(format!("reading {}: {e}", topic.name));
        }
        let mut finished = false;
        let mut broken = None;
        let mut truncated: Vec<(i32, i64)> = Vec::new();
        for part in &fetched.parts {
            let partition = part.partition;
            let (Some(&end), Some(_)) = (ends.get(&partition), next.get(&partition)) else {
                continue;
            };
            let before = part.from;
            let mut offset = before;
            let mut aborted = kbench_wire::records::AbortedFilter::new(&part.data.aborted);
            let decoded = decoder.decode_all(&part.data.records, |header, record| {
                offset = offset.max(header.base_offset + i64::from(header.last_offset_delta) + 1);
                if header.is_control() {
                    // The marker that closes an aborted transaction, passed over.
                    aborted.skips(header);
                    return;
                }
                let in_aborted = header.is_transactional() && aborted.skips(header);
                if record.offset < before || record.offset >= end {
                    return;
                }
                if in_aborted {
                    verifier.passed_over(partition, Stamp::of(&record));
                    return;
                }
                verifier.check(
                    partition,
                    record.offset,
                    Stamp::of(&record),
                    record.value.unwrap_or(&[]),
                );
            });
            if let Err(e) = decoded {
                broken = Some(format!(
                    "decoding {}-{partition} at {before}: {e}",
                    topic.name
                ));
                break;
            }
            let hw = part.data.high_watermark;
            if offset >= end {
                next.remove(&partition);
                finished = true;
            } else if offset == before && hw >= 0 && hw <= offset {
                // Nothing more where more was said to be: truncated meanwhile, or a new leader
                // whose high watermark lags. The log's end, asked again, tells them apart.
                truncated.push((partition, offset));
            } else {
                next.insert(partition, offset);
            }
        }
        for (partition, offset) in truncated.drain(..) {
            if let Ok(now_ends) = cluster.latest_offsets(topic, &[partition]).await
                && now_ends.get(&partition).is_some_and(|e| *e <= offset)
            {
                next.remove(&partition);
                finished = true;
            }
        }
        if broken.is_some() {
            break broken;
        }
        if finished && !next.is_empty() {
            consumer.assign(&next);
        }
    };
    consumer.finish();
    match failed {
        None => verifier.report(Some(written)),
        Some(why) => verifier.report(Some(written)).failed(why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(producer: u64, seq: u64, value: &[u8]) -> Option<Stamp> {
        Stamp::decode(&Stamp::encode(producer, seq, value))
    }

    #[test]
    fn a_clean_read_is_ok() {
        let mut w = Written::for_producer(7);
        w.ack(7, 0, 0, 3);
        w.ack(7, 1, 0, 2);
        let mut v = Verifier::for_producers(&[7]);
        for (o, s) in (0..3).zip(0..3) {
            v.check(0, o, stamp(7, s, b"x"), b"x");
        }
        v.check(1, 9, None, b"someone else's");
        v.check(1, 10, stamp(7, 0, b"y"), b"y");
        v.check(1, 11, stamp(7, 1, b"y"), b"y");
        let r = v.report(Some(&w));
        assert_eq!(r.ok, Some(true), "{r:?}");
        assert_eq!(
            (r.records_read, r.records_verified, r.foreign, r.lost),
            (6, 5, 1, 0)
        );
        assert_eq!(r.unexpected, Some(0));
        assert_eq!(r.duplicated, 0);
    }

    #[test]
    fn transactions_settle_as_committed_or_aborted_and_aborted_records_must_not_be_read() {
        let mut w = Written::transactional(3);
        w.ack(3, 0, 0, 4);
        w.settle(true);
        w.ack(3, 0, 4, 3);
        w.settle(false);
        w.ack(3, 0, 7, 2);
        w.settle(true);
        w.ack(3, 0, 9, 1); // its EndTxn never answered: neither expected nor forbidden
        assert_eq!((w.acked_total(), w.aborted_total()), (6, 3));
        // A read committed reader: the committed records read, the aborted ones passed over.
        let mut v = Verifier::for_producers(&[3]);
        for s in 0..4 {
            v.check(0, s as i64, stamp(3, s, b"c"), b"c");
        }
        for s in 4..7 {
            v.passed_over(0, stamp(3, s, b"a"));
        }
        // A group's next reader, after a handover, passes over the same ones again: once each.
        v.handover(0);
        v.passed_over(0, stamp(3, 5, b"a"));
        v.passed_over(0, stamp(99, 0, b"x")); // another producer's: not counted
        for s in 7..10 {
            v.check(0, s as i64 + 1, stamp(3, s, b"c"), b"c");
        }
        let r = v.report(Some(&w));
        assert_eq!(r.ok, Some(true), "{r:?}");
        assert_eq!(
            (r.lost, r.sequence_gaps, r.aborted_read, r.aborted_skipped),
            (0, 0, 0, 3)
        );
        assert_eq!((r.records_aborted, r.unexpected), (Some(3), Some(0)));
        assert!(
            r.line()
                .contains("0 of 3 aborted records read, 3 passed over")
        );
        // A reader that saw an aborted record (read uncommitted, or a broker that did not list
        // the transaction as aborted) fails.
        let mut v = Verifier::for_producers(&[3]);
        for s in 0..10 {
            v.check(0, s as i64, stamp(3, s, b"c"), b"c");
        }
        let r = v.report(Some(&w));
        assert_eq!(
            (r.ok, r.aborted_read, r.unexpected),
            (Some(false), 3, Some(0))
        );
        // Without the writer, a reader that passed over aborted records sees no gap there.
        let mut v = Verifier::any_producer();
        v.check(0, 0, stamp(3, 0, b"c"), b"c");
        v.passed_over(0, stamp(3, 1, b"a"));
        v.check(0, 3, stamp(3, 2, b"c"), b"c");
        let r = v.report(None);
        assert_eq!((r.ok, r.sequence_gaps, r.lost), (Some(true), 0, 0), "{r:?}");
    }

    #[test]
    fn every_kind_of_trouble_is_counted() {
        let mut w = Written::for_producer(1);
        w.ack(1, 0, 0, 10);
        let mut v = Verifier::for_producers(&[1]);
        v.check(0, 0, stamp(1, 0, b"a"), b"a");
        v.check(0, 1, stamp(1, 2, b"a"), b"a"); // seq 1 skipped …
        v.check(0, 2, stamp(1, 1, b"a"), b"a"); // … arrives late: reordered
        v.check(0, 3, stamp(1, 2, b"a"), b"a"); // a duplicate
        v.check(0, 4, stamp(1, 3, b"a"), b"b"); // corrupted
        v.check(0, 4, stamp(1, 4, b"a"), b"a"); // the offset did not go up
        v.check(0, 12, stamp(1, 11, b"a"), b"a"); // never acknowledged
        // sequences 5..10 acknowledged, never read
        let r = v.report(Some(&w));
        assert_eq!(r.reordered, 1);
        assert_eq!(r.duplicated, 1);
        assert_eq!(r.corrupted, 1);
        assert_eq!(r.offset_regressions, 1);
        assert_eq!(r.lost, 5);
        assert_eq!(r.sequence_gaps, 6);
        assert_eq!(r.unexpected, Some(1));
        assert_eq!(r.ok, Some(false));
        assert!(r.line().starts_with("Verification FAILED"), "{}", r.line());
    }

    /// A retried request written twice: the acknowledged copy and the unacknowledged one are one
    /// duplicate, not an unexpected record.
    #[test]
    fn a_retry_written_twice_is_a_duplicate() {
        let mut w = Written::for_producer(1);
        w.ack(1, 0, 0, 2); // first request
        w.ack(1, 0, 2, 2); // the second, acknowledged on its retry
        let mut v = Verifier::for_producers(&[1]);
        for (o, s) in [(0, 0), (1, 1), (2, 2), (3, 3), (4, 2), (5, 3)] {
            v.check(0, o, stamp(1, s, b"v"), b"v");
        }
        let r = v.report(Some(&w));
        assert_eq!((r.duplicated, r.unexpected, r.lost), (2, Some(0), 0));
        assert_eq!(r.ok, Some(true));
    }

    /// A broker that restarted empty hands out offsets 0, 1, … again: records are told apart by
    /// sequence, so those written before the restart are lost, not found at reused offsets.
    #[test]
    fn reused_offsets_do_not_hide_lost_records() {
        let mut w = Written::for_producer(3);
        w.ack(3, 0, 0, 100); // before the restart, offsets 0..100
        w.ack(3, 0, 100, 50); // after it, offsets 0..50 again
        let mut v = Verifier::for_producers(&[3]);
        for i in 0..50u64 {
            v.check(0, i as i64, stamp(3, 100 + i, b"v"), b"v");
        }
        let r = v.report(Some(&w));
        assert_eq!((r.lost, r.unexpected), (100, Some(0)));
        assert_eq!(r.ok, Some(false));
    }

    #[test]
    fn without_the_writer_lost_is_sequence_gaps() {
        let mut v = Verifier::any_producer();
        for s in [0, 1, 2, 5, 6] {
            v.check(3, s as i64, stamp(9, s, b"z"), b"z");
        }
        let r = v.report(None);
        assert_eq!((r.lost, r.sequence_gaps, r.unexpected), (2, 2, None));
        assert_eq!(r.lost_from, "gaps in each producer's sequence");
    }

    /// Reading only records without a stamp verifies nothing, and is never OK; a writer that
    /// acknowledged nothing, read as nothing, has nothing to verify.
    #[test]
    fn a_verification_of_nothing_is_not_ok() {
        let mut v = Verifier::any_producer();
        for o in 0..200 {
            v.check(0, o, None, b"unstamped");
        }
        let r = v.report(None);
        assert_eq!(
            (r.records_read, r.records_verified, r.foreign),
            (200, 0, 200)
        );
        assert_eq!(r.ok, Some(false));
        assert!(
            r.line()
                .starts_with("Verification FAILED (nothing verified"),
            "{}",
            r.line()
        );
        let r = Verifier::any_producer().report(None);
        assert_eq!(
            r.ok,
            Some(false),
            "nothing read, no writer: nothing verified"
        );
        let w = Written::for_producer(1);
        let r = Verifier::for_producers(&[1]).report(Some(&w));
        assert_eq!(r.ok, Some(true), "nothing acknowledged, nothing read");
    }

    #[test]
    fn memory_is_bounded_by_streams() {
        let mut v = Verifier::any_producer();
        for i in 0..(MAX_STREAMS as u64 + 10) {
            v.check(0, i as i64, stamp(i, u64::MAX - 1, b""), b"");
        }
        let r = v.report(None);
        assert_eq!(r.untracked, 10);
        assert_eq!(r.duplicated, 0);
    }

    /// Agents' reports add exactly; one that could not finish makes the whole unknown, named.
    #[test]
    fn agents_reports_merge_exactly() {
        let report = |verified: u64, lost: u64| {
            VerifyReport {
                records_read: 100,
                records_verified: verified,
                records_acked: Some(verified + lost),
                lost,
                lost_from: "acknowledged records not read".into(),
                duplicated: 1,
                reordered: 0,
                corrupted: 0,
                unexpected: Some(0),
                foreign: 100 - verified,
                untracked: 0,
                sequence_gaps: 0,
                offset_regressions: 0,
                records_aborted: None,
                aborted_read: 0,
                aborted_skipped: 0,
                producers: 1,
                ok: None,
                error: None,
            }
            .judged()
        };
        let (a, b) = (report(60, 0), report(40, 0));
        let m = VerifyReport::merged(&[("a", &a), ("b", &b)]).unwrap();
        assert_eq!(
            (
                m.records_read,
                m.records_verified,
                m.records_acked,
                m.foreign
            ),
            (100, 100, Some(100), 0)
        );
        assert_eq!((m.duplicated, m.producers, m.ok), (2, 2, Some(true)));
        let lossy = report(40, 3);
        let m = VerifyReport::merged(&[("a", &a), ("b", &lossy)]).unwrap();
        assert_eq!((m.lost, m.ok), (3, Some(false)));
        let broken = report(40, 0).failed("read-back timed out".into());
        let m = VerifyReport::merged(&[("a", &a), ("b", &broken)]).unwrap();
        assert_eq!(m.ok, None);
        assert!(m.error.unwrap().contains("agent b: read-back timed out"));
        assert!(VerifyReport::merged(&[]).is_none());
        // Topics add up, and one topic that verified nothing (records without stamps) fails the
        // sum, though the sum verified something.
        let m = VerifyReport::of_topics(&[("a", &a), ("b", &b)]).unwrap();
        assert_eq!(
            (m.records_read, m.records_verified, m.ok),
            (200, 100, Some(true))
        );
        let unstamped = report(0, 0);
        assert_eq!(unstamped.ok, Some(false));
        let m = VerifyReport::of_topics(&[("a", &a), ("b", &unstamped)]).unwrap();
        assert_eq!((m.records_verified, m.ok), (60, Some(false)));
        // A topic that read nothing does not fail the others' verification.
        let empty = VerifyReport {
            records_read: 0,
            records_acked: None,
            foreign: 0,
            ..report(0, 0)
        }
        .judged();
        assert_eq!(empty.ok, Some(false));
        let m = VerifyReport::of_topics(&[("a", &a), ("b", &empty)]).unwrap();
        assert_eq!((m.records_verified, m.ok), (60, Some(true)));
    }
}
