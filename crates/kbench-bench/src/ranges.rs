//! Sets of `u64` kept as disjoint half-open ranges: acknowledged offsets per partition, sequence
//! numbers seen per producer. Memory grows with the number of *gaps*, never with the values — a
//! sequence number of 2^63 read from a foreign key costs one range, not 2^63 bits.

use std::collections::BTreeMap;

/// Disjoint, non-adjacent half-open ranges `[start, end)`, keyed by start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeSet {
    ranges: BTreeMap<u64, u64>,
    len: u64,
}

impl RangeSet {
    pub fn new() -> Self {
        Self::default()
    }

    /// How many values the set holds.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many disjoint ranges: the set's memory, in ranges.
    pub fn range_count(&self) -> usize {
        self.ranges.len()
    }

    /// The range holding `value`, if any.
    fn holding(&self, value: u64) -> Option<(u64, u64)> {
        let (&s, &e) = self.ranges.range(..=value).next_back()?;
        (value < e).then_some((s, e))
    }

    pub fn contains(&self, value: u64) -> bool {
        self.holding(value).is_some()
    }

    /// The largest value held.
    pub fn max(&self) -> Option<u64> {
        self.ranges.iter().next_back().map(|(_, &e)| e - 1)
    }

    /// The smallest value held.
    pub fn min(&self) -> Option<u64> {
        self.ranges.keys().next().copied()
    }

    /// Add one value; true when it was not there before.
    pub fn insert(&mut self, value: u64) -> bool {
        match value.checked_add(1) {
            Some(end) => self.insert_range(value, end) == 1,
            // u64::MAX itself cannot be held in a half-open range; treat it as always new.
            None => true,
        }
    }

    /// Add `[start, end)`; how many of its values were new.
    pub fn insert_range(&mut self, start: u64, end: u64) -> u64 {
        if start >= end {
            return 0;
        }
        let (mut s, mut e) = (start, end);
        let mut covered = 0u64;
        // A range starting at or before `start` that reaches it merges in.
        if let Some((&ps, &pe)) = self.ranges.range(..=start).next_back()
            && pe >= start
        {
            covered += pe.min(end).saturating_sub(start);
            s = ps;
            e = e.max(pe);
            self.ranges.remove(&ps);
        }
        // Ranges starting inside `(start, end]` merge in too.
        while let Some((&ns, &ne)) = self.ranges.range(start..=e).next() {
            covered += ne.min(end).saturating_sub(ns.max(start));
            e = e.max(ne);
            self.ranges.remove(&ns);
        }
        self.ranges.insert(s, e);
        let added = (end - start) - covered;
        self.len += added;
        added
    }

    /// The ranges, in order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.ranges.iter().map(|(&s, &e)| (s, e))
    }

    /// How many values of `self` are not in `other`.
    pub fn count_missing_from(&self, other: &RangeSet) -> u64 {
        let mut missing = 0u64;
        for (s, e) in self.iter() {
            let mut covered = 0u64;
            // Ranges of `other` overlapping [s, e): the one before s, then those starting inside.
            if let Some((_, &oe)) = other.ranges.range(..=s).next_back() {
                covered += oe.min(e).saturating_sub(s);
            }
            for (&os, &oe) in other.ranges.range(s.saturating_add(1)..e) {
                covered += oe.min(e) - os;
            }
            missing += (e - s) - covered;
        }
        missing
    }

    /// The values missing between the smallest value held and the largest (the gaps).
    pub fn gaps(&self) -> u64 {
        match (self.min(), self.max()) {
            (Some(lo), Some(hi)) => (hi - lo + 1) - self.len,
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inserts_merge_and_count() {
        let mut r = RangeSet::new();
        assert!(r.insert(5));
        assert!(!r.insert(5));
        assert!(r.insert(7));
        assert_eq!(r.range_count(), 2);
        assert!(r.insert(6));
        assert_eq!(r.range_count(), 1);
        assert_eq!(r.len(), 3);
        assert_eq!(r.insert_range(0, 10), 7);
        assert_eq!(r.len(), 10);
        assert_eq!(r.range_count(), 1);
        assert_eq!(r.insert_range(20, 30), 10);
        assert_eq!(r.insert_range(5, 25), 10);
        assert_eq!(r.len(), 30);
        assert_eq!(r.range_count(), 1);
        assert!(r.contains(29) && !r.contains(30));
    }

    #[test]
    fn huge_values_cost_one_range() {
        let mut r = RangeSet::new();
        assert!(r.insert(u64::MAX - 1));
        assert!(r.insert(1 << 63));
        assert!(r.insert(0));
        assert!(!r.insert(1 << 63));
        assert_eq!(r.range_count(), 3);
        assert!(r.insert(u64::MAX));
    }

    #[test]
    fn missing_and_gaps() {
        let mut acked = RangeSet::new();
        acked.insert_range(0, 100);
        acked.insert_range(200, 300);
        let mut read = RangeSet::new();
        read.insert_range(0, 50);
        read.insert_range(60, 250);
        assert_eq!(acked.count_missing_from(&read), 10 + 50);
        assert_eq!(read.count_missing_from(&acked), 100);
        assert_eq!(read.gaps(), 10);
        assert_eq!(RangeSet::new().gaps(), 0);
    }

    /// Against a plain set, over pseudo-random inserts.
    #[test]
    fn agrees_with_a_hash_set() {
        let mut r = RangeSet::new();
        let mut h = std::collections::HashSet::new();
        let mut x = 12345u64;
        for _ in 0..20_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let v = (x >> 33) % 2000;
            let n = (x >> 20) % 4;
            let added = r.insert_range(v, v + n);
            let before = h.len();
            for i in v..v + n {
                h.insert(i);
            }
            assert_eq!(added as usize, h.len() - before);
            assert_eq!(r.len() as usize, h.len());
        }
        for v in 0..2010 {
            assert_eq!(r.contains(v), h.contains(&v), "{v}");
        }
    }
}
