//! Waiting for an intended send time without adding the tool's own delay to the latency it
//! reports.
//!
//! tokio's timer counts in whole milliseconds: `sleep_until(t)` wakes at the first tick after
//! `t`, often the one after that — 1 to 2 ms late, which at a fixed rate was most of the latency
//! kbench reported (publish delay p50 1.43 ms of a 1.64 ms p50 on one Tansu, where librdkafka's
//! p50 was 0.24 ms). [`sleep_until`] sleeps on tokio's timer only while the deadline is more than
//! a tick away, then hands the last stretch to one timer thread of the process's own, which sleeps
//! with the kernel's high-resolution timer (its timer slack set to 1 µs), spins the last few
//! microseconds and wakes the task just ahead of the deadline; the task spins what is left. A
//! wait therefore ends within tens of µs of its deadline, for the cost of one thread that sleeps
//! almost all the time (no core is spun).
//!
//! Never used where a millisecond does not matter (progress windows, timeouts): only the
//! generators' intended times and the producer engine's linger deadlines they wait for.

use std::collections::BinaryHeap;
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// Longer waits sleep on tokio's timer first, up to this before the deadline (two of its ticks).
const COARSE_MARGIN: Duration = Duration::from_millis(2);
/// The timer thread wakes its task this long before the deadline (a task's wake-up takes about
/// as long); the task spins the rest.
const WAKE_AHEAD: Duration = Duration::from_micros(20);
/// The timer thread sleeps until this long before a deadline, then spins.
const SPIN: Duration = Duration::from_micros(50);

/// Sleep until `deadline`, waking within tens of µs of it (see the module's doc). Cancel-safe: a
/// wait dropped leaves nothing behind that matters (the timer thread's entry fires into a closed
/// channel).
pub async fn sleep_until(deadline: Instant) {
    let now = Instant::now();
    if deadline <= now {
        return;
    }
    if deadline - now > COARSE_MARGIN {
        tokio::time::sleep_until((deadline - COARSE_MARGIN).into()).await;
    }
    if Instant::now() + WAKE_AHEAD < deadline {
        let (tx, rx) = oneshot::channel();
        timer().add(deadline - WAKE_AHEAD, tx);
        let _ = rx.await;
    }
    // The last microseconds: spun, not slept (a wake-up would take longer than they last).
    while Instant::now() < deadline {
        std::hint::spin_loop();
    }
}

/// A deadline and who waits for it; earliest first in the heap.
struct Entry {
    at: Instant,
    wake: oneshot::Sender<()>,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.at.cmp(&self.at)
    }
}

/// The timer thread's mailbox.
struct Timer {
    tx: Mutex<mpsc::Sender<Entry>>,
}

impl Timer {
    fn add(&self, at: Instant, wake: oneshot::Sender<()>) {
        let _ = self.tx.lock().expect("timer lock").send(Entry { at, wake });
    }
}

fn timer() -> &'static Timer {
    static TIMER: OnceLock<Timer> = OnceLock::new();
    TIMER.get_or_init(|| {
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("kbench-pace".into())
            .spawn(move || run(rx))
            .expect("the pacing timer thread");
        Timer { tx: Mutex::new(tx) }
    })
}

/// The timer thread: sleep (the kernel's high-resolution timer, slack 1 µs) until the earliest
/// deadline is near, spin to it, wake its task; new deadlines end a sleep early.
fn run(rx: mpsc::Receiver<Entry>) {
    // SAFETY: prctl with PR_SET_TIMERSLACK only sets this thread's timer slack.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1_000u64, 0, 0, 0);
    }
    let mut heap: BinaryHeap<Entry> = BinaryHeap::new();
    loop {
        let now = Instant::now();
        while heap.peek().is_some_and(|e| e.at <= now) {
            if let Some(e) = heap.pop() {
                let _ = e.wake.send(());
            }
        }
        let next = heap.peek().map(|e| e.at);
        let received = match next {
            None => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
            Some(at) if at.saturating_duration_since(now) <= SPIN => {
                while Instant::now() < at {
                    std::hint::spin_loop();
                }
                continue;
            }
            Some(at) => rx.recv_timeout(at - now - SPIN),
        };
        match received {
            Ok(entry) => heap.push(entry),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits of every length end at or after their deadline, and a wait already due returns at
    /// once. (How close to the deadline is measured, not asserted: docs/PERFORMANCE.md.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_wait_never_ends_before_its_deadline() {
        for us in [0u64, 5, 30, 200, 900, 1_500, 2_500, 7_000] {
            let deadline = Instant::now() + Duration::from_micros(us);
            sleep_until(deadline).await;
            assert!(Instant::now() >= deadline, "{us} µs");
        }
        // Many at once, out of order: each ends at or after its own.
        let base = Instant::now();
        let waits: Vec<_> = [3_000u64, 500, 1_200, 40, 2_000]
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
}
