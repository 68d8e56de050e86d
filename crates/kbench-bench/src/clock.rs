//! The wall clock distributed runs agree on: µs since the Unix epoch, as this process reads it. A
//! test hook can shift it ([`set_shift_us`], set by `kbench agent` from `KBENCH_TEST_CLOCK_SHIFT_MS`)
//! so that tests can run agents whose clocks disagree on one machine; nothing else sets it.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio_util::sync::CancellationToken;

static SHIFT_US: AtomicI64 = AtomicI64::new(0);

/// Shift this process's wall clock by `us` (a test hook: an agent whose clock is wrong).
pub fn set_shift_us(us: i64) {
    SHIFT_US.store(us, Ordering::Relaxed);
}

/// The shift in force (0 unless a test set one).
pub fn shift_us() -> i64 {
    SHIFT_US.load(Ordering::Relaxed)
}

/// Now, µs since the Unix epoch, on this process's (possibly shifted) clock.
pub fn wall_us() -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64);
    now.saturating_add(shift_us()).max(0) as u64
}

/// Sleep until this clock reads `at_us`; false when `cancel` came first. A time already past
/// returns at once.
pub async fn sleep_until_wall(at_us: u64, cancel: &CancellationToken) -> bool {
    let wait = Duration::from_micros(at_us.saturating_sub(wall_us()));
    tokio::select! {
        _ = tokio::time::sleep(wait) => true,
        _ = cancel.cancelled() => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shift_moves_the_clock() {
        let before = wall_us();
        set_shift_us(5_000_000);
        let shifted = wall_us();
        set_shift_us(0);
        assert!(shifted >= before + 5_000_000, "{before} {shifted}");
        assert!(wall_us() < shifted);
    }
}
