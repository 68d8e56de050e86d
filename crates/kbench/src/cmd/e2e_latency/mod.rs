//! `kbench e2e-latency`: Kafka's `EndToEndLatency` (kafka-e2e-latency.sh) — its arguments, either
//! form, mapped onto the one e2e workload: one producer and one consumer, a closed loop (the next
//! record goes once the last was acknowledged and consumed), the record count, acks and value
//! size. It prints Kafka's lines: a progress line every 1000th record (`i<TAB>latency ms`), then
//! `Avg latency: … ms` and `Percentiles: 50th = …, 99th = …, 99.9th = …` (whole ms).

mod args;

pub use args::E2eLatencyArgs;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kbench_bench::e2e::{CLOSED_LOOP_TIMEOUT, CommitMode, E2eLive, E2eSpec, Span, run_e2e};
use kbench_bench::result::{E2eResultDocument, Target};

use crate::harness::{CliError, CliResult, Harness};
use args::Invocation;

/// How long Kafka's tool polls for each record before it gives up (its POLL_TIMEOUT_MS).
const POLL_TIMEOUT: Duration = Duration::from_secs(60);

/// `kbench e2e-latency`.
pub async fn run(mut args: E2eLatencyArgs) -> CliResult {
    args.output.check()?;
    let inv = args::invocation(&mut args)?;
    let settings = args.connection.settings()?;
    let spec = spec_for(&inv, &args)?;
    let mut harness = Harness::start(Vec::new(), Some(&inv.bootstrap), None).await?;
    let result = drive(&args, &inv, spec, &settings, &mut harness).await;
    harness.finish().await;
    result
}

/// Kafka's tool as an e2e spec: one producer (linger 0, acks as given) and one consumer at the
/// end of the topic (fetch wait 0, a fresh `test-group-<ms>` group committing at the end), one
/// record per request, a closed loop waiting at most Kafka's poll timeout, the records counted.
fn spec_for(inv: &Invocation, args: &E2eLatencyArgs) -> Result<E2eSpec, String> {
    let mut spec = E2eSpec {
        topic: inv.topic.clone(),
        partitions: 1,
        replication_factor: 1,
        producers: 1,
        batch_interval_ms: Span::fixed(0),
        payload_size: Span::fixed(inv.record_size),
        messages_per_batch: Span::fixed(1),
        group_id: format!("test-group-{}", kbench_wire::batch::now_ms()),
        // Kafka's tool commits once, at the end; an interval this long does the same.
        commit: CommitMode::Interval(kbench_bench::spec::MAX_WAIT),
        records: Some(inv.records),
        closed_loop: Some(POLL_TIMEOUT),
        keep_trips: true,
        // Kafka's Random(0).
        seed: 0,
        ..E2eSpec::default()
    };
    spec.producer.acks = inv.acks;
    spec.producer.max_in_flight = 1;
    spec.consumer.fetch_max_wait = Duration::ZERO;
    crate::args::set(&mut spec.timeline_interval, args.output.timeline_interval);
    spec.validate().map_err(|e| crate::args::spec_error(&e))?;
    Ok(spec)
}

/// The run, Kafka's lines as it goes and at its end, the result file, the exit code.
async fn drive(
    args: &E2eLatencyArgs,
    inv: &Invocation,
    spec: E2eSpec,
    settings: &kbench_client::ConnectionSettings,
    harness: &mut Harness,
) -> CliResult {
    let bootstrap = harness.bootstrap();
    let mut config = settings.cluster_config(harness.servers.clone(), Default::default());
    if config.client_id == kbench_client::ConnectionSettings::default().client_id {
        config.client_id = "kbench-e2e-latency".into();
    }
    let live = Arc::new(E2eLive::default());
    let printed = Mutex::new(Printed::default());
    let lines = async {
        loop {
            printed
                .lock()
                .expect("lines lock")
                .print_new(&live, &spec.topic);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let e2e = run_e2e(&spec, &config, live.clone(), harness.stop.clone());
    let job = async {
        tokio::select! {
            r = e2e => r,
            never = lines => match never {},
        }
    };
    let result = harness.run(job, None).await;
    let interrupted = harness.interrupted();
    let run = result.map_err(|e| crate::harness::failure(&e, &bootstrap, interrupted))?;
    printed
        .lock()
        .expect("lines lock")
        .print_new(&live, &spec.topic);
    let trips = live
        .trips
        .lock()
        .expect("trips lock")
        .take()
        .unwrap_or_default();
    let doc = E2eResultDocument::of(
        &run,
        Target::of(&config, harness.embedded_broker()),
        spec.settings_json(),
        spec.seed,
    );
    args.output
        .write_histogram_log(run.started_at, &run.timeline)?;
    args.output.write_json(&doc)?;
    if interrupted {
        return Err(CliError::interrupted(format!(
            "after {} of {} records",
            trips.len(),
            inv.records
        )));
    }
    let whole = run.failed == 0
        && run.lost == 0
        && run.late == 0
        && run.unverified == 0
        && run.aborted.is_none()
        && trips.len() as u64 == inv.records;
    if !whole {
        for (error, n) in &run.errors {
            eprintln!("  {n} × {error}");
        }
        return Err(CliError::failed(incomplete(&run, trips.len(), inv.records)));
    }
    println!("{}", avg_line(&trips));
    println!("{}", percentiles_line(&trips));
    Ok(0)
}

/// Why a run did not time every record: Kafka's words when a record was not read in time.
fn incomplete(run: &kbench_bench::e2e::E2eRun, timed: usize, records: u64) -> String {
    if run
        .errors
        .keys()
        .any(|e| e.starts_with(CLOSED_LOOP_TIMEOUT))
    {
        return format!(
            "poll() timed out before finding a result (timeout:[{}ms])",
            POLL_TIMEOUT.as_millis()
        );
    }
    format!(
        "{timed} of {records} records made the whole trip: {} acknowledged, {} failed, {} consumed, {} lost, {} late{}",
        run.acked,
        run.failed,
        run.consumed,
        run.lost,
        run.late,
        run.aborted
            .as_ref()
            .map(|a| format!("; {a}"))
            .unwrap_or_default()
    )
}

/// What of Kafka's running lines is out: the topic's creation, and the trips seen so far.
#[derive(Default)]
struct Printed {
    topic: bool,
    trips: usize,
}

impl Printed {
    /// Print the lines due since the last call: the topic's creation first, then a progress line
    /// for every 1000th record (the first included), as Kafka's tool prints them.
    fn print_new(&mut self, live: &E2eLive, topic: &str) {
        if !self.topic && live.topic_created.load(Ordering::Relaxed) {
            self.topic = true;
            println!(
                "Topic \"{topic}\" does not exist. Will create topic with 1 partition(s) and replication factor = 1"
            );
        }
        let trips = live.trips.lock().expect("trips lock");
        let Some(trips) = trips.as_ref() else { return };
        for (i, us) in trips.iter().enumerate().skip(self.trips) {
            if i % 1000 == 0 {
                println!("{i}\t{}", java_double(*us as f64 / 1000.0));
            }
        }
        self.trips = trips.len();
    }
}

/// `Avg latency: %.4f ms`: the mean whole trip, ms.
fn avg_line(trips_us: &[u64]) -> String {
    let sum: f64 = trips_us.iter().map(|&t| t as f64).sum();
    let avg_ms = sum / trips_us.len().max(1) as f64 / 1000.0;
    format!("Avg latency: {} ms", java_fixed(avg_ms, 4))
}

/// `Percentiles: 50th = %d, 99th = %d, 99.9th = %d`: Kafka's rank (`latencies[(int)(n * q)]`) of
/// the trips in whole ms (truncated, as its integer division gives them).
fn percentiles_line(trips_us: &[u64]) -> String {
    let mut ms: Vec<u64> = trips_us.iter().map(|t| t / 1000).collect();
    ms.sort_unstable();
    let at = |q: f64| {
        let i = ((ms.len() as f64 * q) as usize).min(ms.len().saturating_sub(1));
        ms.get(i).copied().unwrap_or(0)
    };
    format!(
        "Percentiles: 50th = {}, 99th = {}, 99.9th = {}",
        at(0.5),
        at(0.99),
        at(0.999)
    )
}

/// Java's `Double.toString` for a latency in ms: the shortest digits that read back as `x`, and
/// `.0` when whole. (Java writes values below 10^-3 or from 10^7 up in E notation; a latency in ms
/// from µs is 0 or at least 0.001, and never 10^7 ms.)
fn java_double(x: f64) -> String {
    let s = format!("{x}");
    if s.contains('.') { s } else { format!("{s}.0") }
}

/// Java's `%.{places}f`: the shortest digits of `x` rounded half up (Java's Formatter), not the
/// binary value rounded half to even.
fn java_fixed(x: f64, places: usize) -> String {
    if x < 0.0 {
        return format!("-{}", java_fixed(-x, places));
    }
    let s = format!("{x}");
    let (int, frac) = s.split_once('.').unwrap_or((&s, ""));
    if frac.len() <= places {
        return format!("{int}.{frac:0<places$}");
    }
    let mut digits: Vec<u8> = int.bytes().chain(frac.bytes().take(places)).collect();
    if frac.as_bytes()[places] >= b'5' {
        let mut i = digits.len();
        loop {
            if i == 0 {
                digits.insert(0, b'1');
                break;
            }
            i -= 1;
            if digits[i] == b'9' {
                digits[i] = b'0';
            } else {
                digits[i] += 1;
                break;
            }
        }
    }
    let split = digits.len() - places;
    let text = String::from_utf8(digits).expect("ASCII digits");
    format!("{}.{}", &text[..split], &text[split..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_read_as_kafkas() {
        assert_eq!(java_double(1.0), "1.0");
        assert_eq!(java_double(26.187), "26.187");
        assert_eq!(java_double(0.0), "0.0");
        assert_eq!(java_fixed(1.23455, 4), "1.2346");
        assert_eq!(java_fixed(1.5, 4), "1.5000");
        assert_eq!(java_fixed(9.99996, 4), "10.0000");
        assert_eq!(java_fixed(12.0, 4), "12.0000");
        assert_eq!(avg_line(&[1000, 2000, 3001]), "Avg latency: 2.0003 ms");
        // 1000 trips of 0..999 ms: ranks 500, 990 and 999.
        let trips: Vec<u64> = (0..1000u64).rev().map(|ms| ms * 1000 + 999).collect();
        assert_eq!(
            percentiles_line(&trips),
            "Percentiles: 50th = 500, 99th = 990, 99.9th = 999"
        );
        assert_eq!(
            percentiles_line(&[1500]),
            "Percentiles: 50th = 1, 99th = 1, 99.9th = 1"
        );
    }
}
