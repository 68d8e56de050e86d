//! Waiting for an intended send time without adding the tool's own delay to the latency it
//! reports.
//!
//! tokio's timer counts in whole milliseconds: `sleep_until(t)` wakes at the first tick after
//! `t`, often the one after that — 1 to 2 ms late, which at a fixed rate was most of the latency
//! kbench reported (publish delay p50 1.43 ms of a 1.64 ms p50 on one Tansu, where librdkafka's
//! p50 was 0.24 ms). [`sleep_until`] sleeps on tokio's timer only while the deadline is more than
//! two ticks away; the last stretch waits on a Linux `timerfd` armed for the deadline itself
//! (the kernel's high-resolution timer, absolute, on `CLOCK_MONOTONIC` — the clock `Instant`
//! reads), registered with tokio's reactor like a socket: the worker that runs the task wakes when
//! the timer fires, with no thread of kbench's own in between and no core spun. A few µs left
//! after the wake-up are spun. The timer descriptors are kept in a pool, so that a wait costs
//! three system calls (arm, the reactor's wake-up, read), never an open and a close.
//!
//! Used only where a millisecond matters: the generators' intended times and the producer
//! engine's linger deadlines they wait for. Progress windows and timeouts keep tokio's timer.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// Longer waits sleep on tokio's timer first, up to this before the deadline (two of its ticks).
const COARSE_MARGIN: Duration = Duration::from_millis(2);
/// What is left after the timer's wake-up is spun, up to this (a wake-up takes longer).
const SPIN: Duration = Duration::from_micros(5);

/// Sleep until `deadline`, waking within tens of µs of it (see the module's doc). Cancel-safe:
/// a wait dropped returns its timer to the pool disarmed on its next use.
pub async fn sleep_until(deadline: Instant) {
    let now = Instant::now();
    if deadline <= now {
        return;
    }
    if deadline - now > COARSE_MARGIN {
        tokio::time::sleep_until((deadline - COARSE_MARGIN).into()).await;
    }
    if Instant::now() + SPIN < deadline {
        match Timer::take() {
            Some(timer) => {
                timer.wait(deadline - SPIN).await;
                Timer::give_back(timer);
            }
            // No timerfd (a kernel without it, descriptors exhausted): tokio's timer, late.
            None => tokio::time::sleep_until(deadline.into()).await,
        }
    }
    // The last microseconds: spun, not slept.
    while Instant::now() < deadline {
        std::hint::spin_loop();
    }
}

/// A timerfd registered with tokio's reactor.
struct Timer {
    fd: AsyncFd<OwnedFd>,
}

/// Timers not in use.
static POOL: Mutex<Vec<Timer>> = Mutex::new(Vec::new());

impl Timer {
    /// One from the pool, or a new one.
    fn take() -> Option<Timer> {
        if let Some(t) = POOL.lock().expect("pace pool").pop() {
            return Some(t);
        }
        // SAFETY: timerfd_create returns a new descriptor or -1.
        let raw = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if raw < 0 {
            return None;
        }
        // SAFETY: `raw` is a descriptor this function owns from here.
        let owned = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: the timer's descriptor is owned by the `AsyncFd` and neither replaced nor
        // closed while registered.
        unsafe { AsyncFd::register_with_interest(owned, Interest::READABLE) }
            .ok()
            .map(|fd| Timer { fd })
    }

    fn give_back(timer: Timer) {
        POOL.lock().expect("pace pool").push(timer);
    }

    /// Arm for `at` (absolute, CLOCK_MONOTONIC) and wait until it fires (or has).
    async fn wait(&self, at: Instant) {
        let Some(spec) = monotonic(at) else {
            return;
        };
        let arm = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: spec,
        };
        // SAFETY: a valid timerfd and itimerspec; the old value is not asked for.
        let armed = unsafe {
            libc::timerfd_settime(
                self.fd.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &arm,
                std::ptr::null_mut(),
            )
        };
        if armed < 0 {
            tokio::time::sleep_until(at.into()).await;
            return;
        }
        loop {
            let Ok(mut ready) = self.fd.readable().await else {
                return;
            };
            let mut expirations = 0u64;
            // SAFETY: reads 8 bytes into a u64 from the timerfd.
            let read = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    (&mut expirations as *mut u64).cast(),
                    8,
                )
            };
            if read == 8 {
                return;
            }
            // Not fired yet (a readiness left from an earlier wait): wait again.
            ready.clear_ready();
            if Instant::now() >= at {
                return;
            }
        }
    }
}

/// `at` as a CLOCK_MONOTONIC time (the clock `Instant` reads on Linux).
fn monotonic(at: Instant) -> Option<libc::timespec> {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) } != 0 {
        return None;
    }
    let ahead = at.saturating_duration_since(Instant::now());
    let nanos = now.tv_nsec as u64 + u64::from(ahead.subsec_nanos());
    Some(libc::timespec {
        tv_sec: now.tv_sec
            + ahead.as_secs() as libc::time_t
            + (nanos / 1_000_000_000) as libc::time_t,
        tv_nsec: (nanos % 1_000_000_000) as libc::c_long,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits of every length end at or after their deadline, and a wait already due returns at
    /// once; many at once, out of order, each at or after its own. (How close to the deadline is
    /// measured, not asserted: docs/PERFORMANCE.md.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_wait_never_ends_before_its_deadline() {
        for us in [0u64, 3, 30, 200, 900, 1_500, 2_500, 7_000] {
            let deadline = Instant::now() + Duration::from_micros(us);
            sleep_until(deadline).await;
            assert!(Instant::now() >= deadline, "{us} µs");
        }
        let base = Instant::now();
        let waits: Vec<_> = [3_000u64, 500, 1_200, 40, 2_000, 500]
            .into_iter()
            .map(|us| {
                tokio::spawn(async move {
                    let d = base + Duration::from_micros(us);
                    sleep_until(d).await;
                    Instant::now() >= d
                })
            })
            .collect();
        for w in waits {
            assert!(w.await.unwrap());
        }
    }

    /// A wait dropped before its timer fired leaves a timer that serves the next wait rightly.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_wait_dropped_leaves_a_timer_fit_for_the_next() {
        let early = Instant::now() + Duration::from_micros(800);
        let _ = tokio::time::timeout(Duration::from_micros(100), sleep_until(early)).await;
        for _ in 0..5 {
            let d = Instant::now() + Duration::from_micros(700);
            sleep_until(d).await;
            assert!(Instant::now() >= d);
        }
    }
}
