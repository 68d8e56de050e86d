//! Starting and stopping the embedded broker: `kbench broker` in a child process on a free loopback
//! port, so that getrusage of this process measures the client alone. The child is in its own process
//! group (Ctrl-C reaches only us; we stop it), dies with us if we are killed (PR_SET_PDEATHSIG), and is
//! killed when the handle is dropped: no orphan broker is left behind.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

/// A running embedded broker.
pub struct EmbeddedBroker {
    child: Child,
    addr: SocketAddr,
    /// What it advertises when not its own address (a fault proxy in front of it).
    advertise: Option<SocketAddr>,
}

/// How long a fresh broker may take to answer ApiVersions.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

impl EmbeddedBroker {
    /// Start the broker and wait until it answers.
    pub async fn start() -> Result<EmbeddedBroker, String> {
        Self::start_advertising(None).await
    }

    /// Start the broker advertising `advertise` (a proxy in front of it) instead of its address.
    pub async fn start_advertising(
        advertise: Option<SocketAddr>,
    ) -> Result<EmbeddedBroker, String> {
        let mut last = String::new();
        for _ in 0..3 {
            let addr = free_loopback_port()?;
            match Self::start_on(addr, advertise).await {
                Ok(b) => return Ok(b),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    async fn start_on(
        addr: SocketAddr,
        advertise: Option<SocketAddr>,
    ) -> Result<EmbeddedBroker, String> {
        let exe = std::env::current_exe()
            .map_err(|e| format!("embedded broker: cannot find the kbench executable: {e}"))?;
        let mut cmd = Command::new(exe);
        cmd.arg("broker")
            .arg("--listen")
            .arg(addr.to_string())
            .arg("--quiet")
            .args(advertise.map(|a| format!("--advertise={a}")))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::setpgid(0, 0);
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("embedded broker: cannot start `kbench broker`: {e}"))?;
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!(
                    "embedded broker on {addr} exited during start-up ({status})"
                ));
            }
            let probe = kbench_client::Connection::connect(
                &addr.to_string(),
                "kbench-probe",
                Duration::from_secs(1),
                Duration::from_secs(5),
                1,
                None,
                None,
            )
            .await;
            if probe.is_ok() {
                return Ok(EmbeddedBroker {
                    child,
                    addr,
                    advertise,
                });
            }
            if started.elapsed() > READY_TIMEOUT {
                let _ = child.kill().await;
                return Err(format!(
                    "embedded broker on {addr} did not answer within {} s",
                    READY_TIMEOUT.as_secs()
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Resolves when the broker process ends, with a description of how.
    pub async fn exited(&mut self) -> String {
        match self.child.wait().await {
            Ok(status) => format!("the embedded broker exited unexpectedly ({status})"),
            Err(e) => format!("the embedded broker could not be watched: {e}"),
        }
    }

    /// Stop the broker and reap it.
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }

    /// Signal the broker's process group (the child leads it): SIGSTOP, SIGCONT.
    pub fn signal(&self, signal: i32) -> Result<(), String> {
        let pid = self
            .child
            .id()
            .ok_or_else(|| "the embedded broker is not running".to_string())?;
        // SAFETY: a plain syscall; the group is the child's own (setpgid at spawn).
        if unsafe { libc::kill(-(pid as i32), signal) } != 0 {
            return Err(format!(
                "signal {signal} to the embedded broker: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(())
    }

    /// SIGKILL the broker and reap it; it stays down.
    pub async fn kill(&mut self) {
        let _ = self.signal(libc::SIGCONT); // a stopped process dies on SIGKILL too, but reap it
        let _ = self.child.kill().await;
    }

    /// Kill the broker and start it again on the same address (and advertised address). In-memory,
    /// it comes back empty.
    pub async fn restart(&mut self) -> Result<(), String> {
        self.kill().await;
        let mut last = String::new();
        // The port was just released: a few tries while the kernel lets go of it.
        for _ in 0..20 {
            match Self::start_on(self.addr, self.advertise).await {
                Ok(b) => {
                    *self = b;
                    return Ok(());
                }
                Err(e) => last = e,
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(last)
    }
}

/// Where a command runs: the bootstrap list given to `--bootstrap-server` (checked), or, with none,
/// an embedded broker started now (said on stderr) that the caller stops at the end. An unusable
/// list is `Err` with exit code 2, a broker that does not start exit code 1.
pub async fn bootstrap_or_embedded(
    given: Option<&str>,
) -> Result<(Vec<String>, Option<EmbeddedBroker>), (u8, String)> {
    if let Some(list) = given {
        return kbench_bench::spec::bootstrap_list(list)
            .map(|servers| (servers, None))
            .map_err(|e| (crate::args::EXIT_USAGE, format!("--bootstrap-server {e}")));
    }
    let broker = EmbeddedBroker::start()
        .await
        .map_err(|e| (crate::args::EXIT_FAILED, e))?;
    eprintln!(
        "kbench: no --bootstrap-server given; started an embedded Tansu broker (in-memory) on {} as child process {}",
        broker.addr(),
        broker.pid().map_or_else(|| "?".into(), |p| p.to_string())
    );
    Ok((vec![broker.addr().to_string()], Some(broker)))
}

/// A loopback port nobody is listening on right now.
fn free_loopback_port() -> Result<SocketAddr, String> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(|e| format!("embedded broker: no free loopback port: {e}"))?;
    listener
        .local_addr()
        .map_err(|e| format!("embedded broker: no free loopback port: {e}"))
}
