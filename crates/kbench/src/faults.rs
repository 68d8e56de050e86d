//! Applying a fault schedule (`--fault`, [`kbench_bench::fault`]) to the embedded broker during a
//! run: SIGSTOP/SIGCONT (pause-broker), SIGKILL (kill-broker), SIGKILL and start again on the same
//! address (restart-broker), and — through a fault proxy that the broker advertises, so that every
//! connection crosses it — delay and loss on the connection.
//!
//! Why a proxy and not `tc netem`: netem needs root and the `sch_netem` kernel module (which the
//! machines this was built on do not have); a proxy on loopback works for every user. Loss is what
//! packet loss does to a TCP stream: a chunk, and everything behind it, held for a retransmission
//! time-out ([`RTO`]) with the given probability.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use kbench_bench::fault::{AppliedFault, Fault, FaultAction};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::embedded::EmbeddedBroker;

/// `--fault` on a workload.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct FaultArgs {
    /// A fault during the run, on the embedded broker (no --bootstrap-server): 'at=20s
    /// pause-broker=5s', 'at=10s kill-broker', 'at=10s restart-broker', 'at=5s delay=50ms
    /// [for=10s]', 'at=5s loss=1% [for=10s]'. Times are from the workload's start. Repeatable; the
    /// result's `faults` says when each began and ended.
    #[arg(long = "fault", value_name = "FAULT")]
    pub faults: Vec<String>,
}

/// A TCP retransmission time-out: what a lost segment costs.
pub const RTO: Duration = Duration::from_millis(200);

/// The schedule, checked; an error names `--fault` (or `--bootstrap-server`, which faults cannot
/// reach).
pub fn plan(args: &FaultArgs, bootstrap: Option<&str>) -> Result<Vec<Fault>, String> {
    let (faults, members) = plan_consume(args, bootstrap)?;
    if let Some(f) = members.first() {
        return Err(format!(
            "--fault {:?}: {} acts on a consumer group's members: only on `kbench consume` and `kbench e2e`",
            f.spec,
            f.action.kind()
        ));
    }
    Ok(faults)
}

/// `kbench consume`'s schedule: the broker's faults (as [`plan`]) and its group members' faults
/// (`consumer-join=`, `consumer-leave=`, `consumer-crash=`, `consumer-restart=`), which the run applies itself and which
/// work on any cluster.
pub fn plan_consume(
    args: &FaultArgs,
    bootstrap: Option<&str>,
) -> Result<(Vec<Fault>, Vec<Fault>), String> {
    let all = kbench_bench::fault::parse_schedule(&args.faults)
        .map_err(|e| format!("--fault {}", e.reason))?;
    let (members, faults): (Vec<Fault>, Vec<Fault>) =
        all.into_iter().partition(|f| f.action.is_member());
    if !faults.is_empty() && bootstrap.is_some() {
        return Err(
            "--fault: applies to the embedded broker that kbench starts and controls; not with --bootstrap-server"
                .into(),
        );
    }
    Ok((faults, members))
}

/// The embedded broker for a faulted run: behind a fault proxy when the schedule has network
/// faults. Returns the broker, the proxy, and the bootstrap address.
pub async fn start_broker(
    faults: &[Fault],
) -> Result<(EmbeddedBroker, Option<FaultProxy>, String), String> {
    if faults.iter().any(|f| f.action.is_network()) {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .map_err(|e| format!("fault proxy: no loopback port: {e}"))?;
        let front = listener
            .local_addr()
            .map_err(|e| format!("fault proxy: {e}"))?;
        let broker = EmbeddedBroker::start_advertising(Some(front)).await?;
        let proxy = FaultProxy::start(listener, broker.addr());
        eprintln!(
            "kbench: started an embedded Tansu broker (in-memory) on {} behind a fault proxy on {front}",
            broker.addr()
        );
        Ok((broker, Some(proxy), front.to_string()))
    } else {
        let broker = EmbeddedBroker::start().await?;
        eprintln!(
            "kbench: started an embedded Tansu broker (in-memory) on {} for the fault schedule, child process {}",
            broker.addr(),
            broker.pid().map_or_else(|| "?".into(), |p| p.to_string())
        );
        let addr = broker.addr().to_string();
        Ok((broker, None, addr))
    }
}

/// The run's broker: the cluster named, else the embedded broker — for a fault schedule the
/// embedded broker that the schedule acts on (behind the fault proxy when it has network faults).
/// An error carries the exit code.
pub async fn start(
    faults: &[Fault],
    bootstrap: Option<&str>,
) -> Result<(Vec<String>, Option<EmbeddedBroker>, Option<FaultProxy>), (u8, String)> {
    if faults.is_empty() {
        crate::embedded::bootstrap_or_embedded(bootstrap)
            .await
            .map(|(servers, embedded)| (servers, embedded, None))
    } else {
        start_broker(faults)
            .await
            .map(|(broker, proxy, addr)| (vec![addr], Some(broker), proxy))
            .map_err(|e| (crate::args::EXIT_FAILED, e))
    }
}

/// `job` under `crate::signals::until_stopped`, and the schedule applied beside it from now: the
/// driver then owns the broker (a broker the schedule kills is not a reason to stop). Without a
/// schedule the broker's exit stops the job, as always. The applied faults, when there was a
/// schedule.
pub async fn run_under<T>(
    job: impl std::future::Future<Output = T>,
    (faults, proxy, recreate): (Vec<Fault>, Option<&FaultProxy>, Option<Recreate>),
    embedded: Option<&mut EmbeddedBroker>,
    stop: &kbench_bench::Stop,
) -> ((T, bool), Option<Vec<AppliedFault>>) {
    match embedded {
        Some(broker) if !faults.is_empty() => {
            let done = CancellationToken::new();
            let driver = drive(
                faults,
                broker,
                proxy,
                Instant::now(),
                recreate,
                done.clone(),
            );
            let job = async {
                let r = crate::signals::until_stopped(job, stop, None).await;
                done.cancel();
                r
            };
            let (r, applied) = tokio::join!(job, driver);
            (r, Some(applied))
        }
        embedded => (
            crate::signals::until_stopped(job, stop, embedded).await,
            None,
        ),
    }
}

/// The applied faults: one line each on stdout, and the result's `faults`.
pub fn report(applied: Option<Vec<AppliedFault>>, document: &mut serde_json::Value) {
    if let Some(applied) = applied {
        for f in &applied {
            println!("{}", line(f));
        }
        document["faults"] = serde_json::to_value(&applied).unwrap_or_default();
    }
}

/// After a restart, what the run needs on the empty broker again: its topic.
pub type Recreate = Arc<
    dyn Fn(
            String,
        )
            -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send>>
        + Send
        + Sync,
>;

/// After a restart-broker fault: the run's topic, created again on the empty broker.
pub fn topic_recreator(
    settings: &kbench_client::ConnectionSettings,
    pins: &kbench_wire::Pins,
    topic: &str,
    partitions: i32,
    replication_factor: i16,
) -> Recreate {
    let (settings, pins, topic) = (settings.clone(), pins.clone(), topic.to_string());
    Arc::new(move |addr: String| {
        let config = settings.cluster_config(vec![addr], pins.clone());
        let topic = topic.clone();
        Box::pin(async move {
            let cluster = kbench_client::Cluster::connect(config)
                .await
                .map_err(|e| e.to_string())?;
            cluster
                .ensure_topic(&topic, partitions, replication_factor)
                .await
                .map_err(|e| format!("topic {topic}: {e}"))?;
            cluster.close(std::time::Duration::from_secs(1)).await;
            Ok(())
        })
    })
}

/// Apply `faults` from `start` until `done`: each at its time, recorded as it happens. Faults not
/// reached when the run ends are recorded so. A paused broker is always resumed.
pub async fn drive(
    faults: Vec<Fault>,
    broker: &mut EmbeddedBroker,
    proxy: Option<&FaultProxy>,
    start: Instant,
    recreate: Option<Recreate>,
    done: CancellationToken,
) -> Vec<AppliedFault> {
    let wall_start = SystemTime::now();
    let since = |at: Instant| (at - start).as_secs_f64();
    let stamp = |at: Instant| kbench_bench::result::rfc3339(wall_start + (at - start));
    let mut applied = Vec::with_capacity(faults.len());
    // Network faults that end on their own: (when, which applied entry).
    let mut ends: Vec<(Instant, usize, FaultAction)> = Vec::new();
    for fault in faults {
        let due = start + fault.at;
        let mut entry = AppliedFault {
            fault: fault.spec.clone(),
            kind: fault.action.kind().to_string(),
            began_s: None,
            ended_s: None,
            began_at: None,
            ended_at: None,
            error: None,
        };
        // Wait for the fault's time, ending network faults that are due meanwhile.
        loop {
            ends.sort_by_key(|(at, ..)| *at);
            let next_end = ends.first().map(|(at, ..)| *at);
            let wake = next_end.map_or(due, |e| e.min(due));
            tokio::select! {
                _ = done.cancelled() => break,
                _ = tokio::time::sleep_until(wake.into()) => {}
            }
            if let Some(end) = next_end
                && Instant::now() >= end
            {
                let (_, idx, action) = ends.remove(0);
                if let Some(p) = proxy {
                    p.clear(&action);
                }
                let now = Instant::now();
                let e: &mut AppliedFault = &mut applied[idx];
                e.ended_s = Some(since(now));
                e.ended_at = Some(stamp(now));
                continue;
            }
            if Instant::now() >= due {
                break;
            }
        }
        if done.is_cancelled() {
            entry.error = Some("not applied: the run ended first".into());
            applied.push(entry);
            continue;
        }
        let began = Instant::now();
        entry.began_s = Some(since(began));
        entry.began_at = Some(stamp(began));
        eprintln!("kbench: fault {} at {:.1} s", fault.spec, since(began));
        match &fault.action {
            FaultAction::PauseBroker { for_ } => {
                match broker.signal(libc::SIGSTOP) {
                    Ok(()) => {
                        tokio::select! {
                            _ = done.cancelled() => {}
                            _ = tokio::time::sleep(*for_) => {}
                        }
                        if let Err(e) = broker.signal(libc::SIGCONT) {
                            entry.error = Some(e);
                        }
                    }
                    Err(e) => entry.error = Some(e),
                }
                let now = Instant::now();
                entry.ended_s = Some(since(now));
                entry.ended_at = Some(stamp(now));
            }
            FaultAction::KillBroker => {
                broker.kill().await;
                entry.ended_s = entry.began_s;
                entry.ended_at = entry.began_at.clone();
            }
            FaultAction::RestartBroker => {
                let restarted = broker.restart().await;
                let topic = match (&restarted, &recreate) {
                    (Ok(()), Some(r)) => r(broker.addr().to_string()).await,
                    _ => Ok(()),
                };
                if let Err(e) = restarted.and(topic) {
                    entry.error = Some(format!("restart: {e}"));
                }
                let now = Instant::now();
                entry.ended_s = Some(since(now));
                entry.ended_at = Some(stamp(now));
            }
            action @ (FaultAction::Delay { for_, .. } | FaultAction::Loss { for_, .. }) => {
                match proxy {
                    Some(p) => {
                        p.apply(action);
                        if let Some(d) = for_ {
                            ends.push((began + *d, applied.len(), action.clone()));
                        }
                    }
                    None => entry.error = Some("no fault proxy in front of the broker".into()),
                }
            }
            // Never here: the consume run applies its members' faults itself (`plan_consume`).
            FaultAction::ConsumerJoin { .. }
            | FaultAction::ConsumerLeave { .. }
            | FaultAction::ConsumerCrash { .. }
            | FaultAction::ConsumerRestart { .. } => {
                entry.error = Some("a group member's fault: the consume run applies it".into());
            }
        }
        applied.push(entry);
    }
    // Network faults still on: they end with the run (or at their own time, if sooner).
    ends.sort_by_key(|(at, ..)| *at);
    for (at, idx, action) in ends {
        tokio::select! {
            _ = done.cancelled() => {}
            _ = tokio::time::sleep_until(at.into()) => {}
        }
        if let Some(p) = proxy {
            p.clear(&action);
        }
        let now = Instant::now();
        applied[idx].ended_s = Some(since(now));
        applied[idx].ended_at = Some(stamp(now));
    }
    applied
}

/// A fault as the CLI prints it after the run.
pub fn line(f: &AppliedFault) -> String {
    let at = |s: Option<f64>| s.map_or_else(|| "-".to_string(), |s| format!("{s:.1} s"));
    match &f.error {
        Some(e) if f.began_s.is_none() => format!("Fault {}: {e}", f.fault),
        Some(e) => format!(
            "Fault {}: from {} to {}; {e}",
            f.fault,
            at(f.began_s),
            at(f.ended_s)
        ),
        None => format!(
            "Fault {}: from {} to {}",
            f.fault,
            at(f.began_s),
            at(f.ended_s)
        ),
    }
}

/// Network faults applied to every connection through it.
#[derive(Default)]
struct ProxyState {
    delay_us: AtomicU64,
    /// Loss probability in parts per million.
    loss_ppm: AtomicU64,
    connections: AtomicU64,
}

/// A loopback TCP proxy in front of the embedded broker.
pub struct FaultProxy {
    state: Arc<ProxyState>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FaultProxy {
    fn start(listener: TcpListener, target: SocketAddr) -> FaultProxy {
        let state = Arc::new(ProxyState::default());
        let shared = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let state = shared.clone();
                state.connections.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(async move {
                    let Ok(upstream) = TcpStream::connect(target).await else {
                        return; // the broker is down: the client sees its connection close
                    };
                    let _ = client.set_nodelay(true);
                    let _ = upstream.set_nodelay(true);
                    let (cr, cw) = client.into_split();
                    let (ur, uw) = upstream.into_split();
                    let seed = state.connections.load(Ordering::Relaxed);
                    tokio::join!(
                        pump(cr, uw, state.clone(), seed * 2 + 1),
                        pump(ur, cw, state.clone(), seed * 2 + 2)
                    );
                });
            }
        });
        FaultProxy { state, task }
    }

    fn apply(&self, action: &FaultAction) {
        match action {
            FaultAction::Delay { delay, .. } => self
                .state
                .delay_us
                .store(delay.as_micros() as u64, Ordering::Relaxed),
            FaultAction::Loss { percent, .. } => self
                .state
                .loss_ppm
                .store((percent * 10_000.0).round() as u64, Ordering::Relaxed),
            _ => {}
        }
    }

    fn clear(&self, action: &FaultAction) {
        match action {
            FaultAction::Delay { .. } => self.state.delay_us.store(0, Ordering::Relaxed),
            FaultAction::Loss { .. } => self.state.loss_ppm.store(0, Ordering::Relaxed),
            _ => {}
        }
    }
}

/// Copy one direction, each chunk delivered at its time: read + delay (+ an RTO when "lost"), in
/// order — a held chunk holds everything behind it, as in TCP. At most 256 chunks wait.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    state: Arc<ProxyState>,
    seed: u64,
) {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(tokio::time::Instant, Vec<u8>)>(256);
    let reader = async move {
        let mut rng = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            let mut due = tokio::time::Instant::now()
                + Duration::from_micros(state.delay_us.load(Ordering::Relaxed));
            let loss = state.loss_ppm.load(Ordering::Relaxed);
            if loss > 0 {
                // xorshift64
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                if rng % 1_000_000 < loss {
                    due += RTO;
                }
            }
            if tx.send((due, buf[..n].to_vec())).await.is_err() {
                return;
            }
        }
    };
    let writer = async move {
        while let Some((due, chunk)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(reader, writer);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_need_the_embedded_broker() {
        let args = FaultArgs {
            faults: vec!["at=1s kill-broker".into()],
        };
        let e = plan(&args, Some("127.0.0.1:9092")).unwrap_err();
        assert!(
            e.contains("--fault") && e.contains("--bootstrap-server"),
            "{e}"
        );
        assert_eq!(plan(&args, None).unwrap().len(), 1);
        let bad = FaultArgs {
            faults: vec!["at=1s".into()],
        };
        assert!(plan(&bad, None).unwrap_err().starts_with("--fault "));
    }

    /// Delay through the proxy: a round trip takes at least twice the delay, and nothing is lost
    /// or reordered.
    #[tokio::test]
    async fn the_proxy_delays_and_keeps_order() {
        let echo = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let target = echo.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = echo.accept().await.unwrap();
            let mut buf = [0u8; 4096];
            loop {
                let n = s.read(&mut buf).await.unwrap();
                if n == 0 {
                    return;
                }
                s.write_all(&buf[..n]).await.unwrap();
            }
        });
        let front = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let addr = front.local_addr().unwrap();
        let proxy = FaultProxy::start(front, target);
        proxy.apply(&FaultAction::Delay {
            delay: Duration::from_millis(30),
            for_: None,
        });
        proxy.apply(&FaultAction::Loss {
            percent: 50.0,
            for_: None,
        });
        let mut c = TcpStream::connect(addr).await.unwrap();
        let started = Instant::now();
        let sent: Vec<u8> = (0..200u32).flat_map(|i| i.to_be_bytes()).collect();
        for chunk in sent.chunks(40) {
            c.write_all(chunk).await.unwrap();
        }
        let mut back = vec![0u8; sent.len()];
        c.read_exact(&mut back).await.unwrap();
        assert_eq!(back, sent);
        assert!(started.elapsed() >= Duration::from_millis(60));
        proxy.clear(&FaultAction::Loss {
            percent: 0.0,
            for_: None,
        });
        assert_eq!(proxy.state.loss_ppm.load(Ordering::Relaxed), 0);
    }
}
