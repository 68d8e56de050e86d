//! Measurement primitives: process CPU time from getrusage, latency histograms and their summaries.

use hdrhistogram::Histogram;
use serde::Serialize;

/// User and system CPU time of this process (all its threads; never its children).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuTime {
    pub user_us: u64,
    pub sys_us: u64,
}

impl CpuTime {
    /// CPU used by this process so far.
    pub fn now() -> CpuTime {
        // SAFETY: getrusage fills the struct we hand it and has no other effect.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
        if rc != 0 {
            return CpuTime::default();
        }
        let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
        CpuTime {
            user_us: us(usage.ru_utime),
            sys_us: us(usage.ru_stime),
        }
    }

    /// CPU used between `earlier` and `self`.
    pub fn since(self, earlier: CpuTime) -> CpuTime {
        CpuTime {
            user_us: self.user_us.saturating_sub(earlier.user_us),
            sys_us: self.sys_us.saturating_sub(earlier.sys_us),
        }
    }

    pub fn total_us(self) -> u64 {
        self.user_us + self.sys_us
    }
}

/// Peak resident set size of this process, in KiB.
pub fn peak_rss_kib() -> u64 {
    // SAFETY: as above.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    if rc != 0 { 0 } else { usage.ru_maxrss as u64 }
}

/// Median and IQR/median of a sample.
pub fn median_and_spread(xs: &[f64]) -> (f64, f64) {
    if xs.is_empty() {
        return (0.0, 0.0);
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let q = |p: f64| {
        let pos = p * (v.len() - 1) as f64;
        let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
        v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
    };
    let median = q(0.5);
    let spread = if median > 0.0 {
        (q(0.75) - q(0.25)) / median
    } else {
        0.0
    };
    (median, spread)
}

/// A latency histogram in µs: 1 µs to one hour, 3 significant digits.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
}

/// The latency figures a result reports, in µs.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, PartialEq)]
pub struct LatencySummary {
    pub count: u64,
    pub min: u64,
    pub max: u64,
    pub mean: f64,
    pub p50: u64,
    pub p80: u64,
    pub p90: u64,
    pub p95: u64,
    pub p98: u64,
    pub p99: u64,
    #[serde(rename = "p99.9")]
    pub p99_9: u64,
    /// The whole histogram, HdrHistogram V2 format, base64: merge runs or agents exactly from this.
    pub histogram: String,
}

impl LatencySummary {
    pub fn of(h: &Histogram<u64>) -> LatencySummary {
        let empty = h.is_empty();
        let q = |q: f64| if empty { 0 } else { h.value_at_quantile(q) };
        LatencySummary {
            count: h.len(),
            min: if empty { 0 } else { h.min() },
            max: h.max(),
            mean: if empty { 0.0 } else { h.mean() },
            p50: q(0.50),
            p80: q(0.80),
            p90: q(0.90),
            p95: q(0.95),
            p98: q(0.98),
            p99: q(0.99),
            p99_9: q(0.999),
            histogram: encode_histogram(h),
        }
    }
}

/// Serialise a histogram (V2, base64) so that it can be merged later without loss.
pub fn encode_histogram(h: &Histogram<u64>) -> String {
    use base64::Engine as _;
    use hdrhistogram::serialization::{Serializer, V2Serializer};
    let mut bytes = Vec::new();
    match V2Serializer::new().serialize(h, &mut bytes) {
        Ok(_) => base64::engine::general_purpose::STANDARD.encode(bytes),
        Err(_) => String::new(),
    }
}

/// Read back a histogram written by [`encode_histogram`].
pub fn decode_histogram(s: &str) -> Option<Histogram<u64>> {
    use base64::Engine as _;
    use hdrhistogram::serialization::Deserializer;
    let bytes = base64::engine::general_purpose::STANDARD.decode(s).ok()?;
    Deserializer::new().deserialize(&mut bytes.as_slice()).ok()
}

/// A global allocator that counts allocations, so that benchmarks can report allocations per record.
/// The binary installs it (`#[global_allocator]`); a relaxed atomic increment per allocation is its
/// whole cost. Underneath is the system allocator behind [`kbench_wire::alloc::Reserving`]: an
/// element count from the wire cannot abort the process.
pub struct CountingAlloc;

static UNDER: kbench_wire::alloc::Reserving<std::alloc::System> =
    kbench_wire::alloc::Reserving(std::alloc::System);

static ALLOCATIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

// SAFETY: defers to `UNDER`; only counts.
unsafe impl std::alloc::GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        unsafe { UNDER.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        unsafe { UNDER.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        unsafe { UNDER.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        unsafe { UNDER.realloc(ptr, layout, new_size) }
    }
}

/// Allocations so far in this process (0 forever when [`CountingAlloc`] is not installed).
pub fn allocations() -> u64 {
    ALLOCATIONS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Whether [`CountingAlloc`] is the global allocator, i.e. whether [`allocations`] means anything.
pub fn counting_allocations() -> bool {
    let before = allocations();
    drop(std::hint::black_box(Box::new(0u64)));
    allocations() > before
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_moves_forward_when_working() {
        let before = CpuTime::now();
        let mut x = 0u64;
        for i in 0..50_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(CpuTime::now().since(before).total_us() > 0);
    }

    #[test]
    fn histogram_survives_encoding() {
        let mut h = latency_histogram();
        for v in [5, 10, 1000, 250_000] {
            h.record(v).unwrap();
        }
        let back = decode_histogram(&encode_histogram(&h)).unwrap();
        assert_eq!(back.len(), 4);
        assert_eq!(back.max(), h.max());
        let s = LatencySummary::of(&h);
        assert!(s.p50 <= s.p95 && s.p95 <= s.p99 && s.p99 <= s.p99_9 && s.p99_9 <= s.max);
    }
}
