//! One run harness for every command that runs a workload: the broker it runs against (the cluster
//! named, or the embedded one, under a fault schedule), the metrics endpoint, the stop (a signal,
//! the embedded broker gone) and the fault schedule beside the job; and the exit code as a value
//! ([`CliError`]). Commands say what to run and what to print; never how a run is stopped.

use std::future::Future;

use kbench_bench::fault::{AppliedFault, Fault};
use kbench_bench::{BenchError, Stop};

use crate::args::{EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE};
use crate::embedded::EmbeddedBroker;
use crate::faults::{FaultProxy, Recreate};
use crate::metrics::Endpoint;

/// A command's failure: the line it prints (after `kbench: `) and its exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError {
    pub code: u8,
    line: String,
}

impl CliError {
    /// Bad input: exit 2, `kbench: error: …`.
    pub fn usage(message: impl std::fmt::Display) -> CliError {
        CliError::with_code(EXIT_USAGE, message)
    }

    /// The run could not happen or went wrong: exit 1, `kbench: error: …`.
    pub fn failed(message: impl std::fmt::Display) -> CliError {
        CliError::with_code(EXIT_FAILED, message)
    }

    /// `kbench: error: …` with `code`.
    pub fn with_code(code: u8, message: impl std::fmt::Display) -> CliError {
        CliError {
            code,
            line: format!("error: {message}"),
        }
    }

    /// The user stopped it before it began: exit 130, `kbench: interrupted …` (not an error).
    pub fn interrupted(message: impl std::fmt::Display) -> CliError {
        CliError {
            code: EXIT_INTERRUPTED,
            line: format!("interrupted {message}"),
        }
    }

    /// Say it on stderr; the exit code.
    pub fn report(&self) -> u8 {
        eprintln!("kbench: {}", self.line);
        self.code
    }
}

/// A flag's or a spec's complaint, before anything ran: a usage error.
impl From<String> for CliError {
    fn from(message: String) -> CliError {
        CliError::usage(message)
    }
}

/// What a command returns: its exit code, or the failure that ends it.
pub type CliResult = Result<u8, CliError>;

/// The exit code of a command's result.
pub fn exit_code(result: CliResult) -> u8 {
    result.unwrap_or_else(|e| e.report())
}

/// A job that could not run, as the command ends: said with the flag a user would change; exit 130
/// when the user stopped it, else 1.
pub fn failure(e: &BenchError, bootstrap: &str, interrupted: bool) -> CliError {
    let code = if interrupted {
        EXIT_INTERRUPTED
    } else {
        EXIT_FAILED
    };
    CliError::with_code(code, describe(e, bootstrap))
}

/// A job's error, said with the flag a user would change.
pub fn describe(e: &BenchError, bootstrap: &str) -> String {
    match e {
        BenchError::Spec(s) => crate::args::spec_error(s),
        BenchError::Connect { reason, .. } => {
            format!("--bootstrap-server {bootstrap}: cannot connect: {reason}")
        }
        BenchError::Topic { topic, source } => format!("--topic {topic}: {source}"),
        other => other.to_string(),
    }
}

/// A run's surroundings, from its broker's start to its end.
pub struct Harness {
    /// Where the run connects.
    pub servers: Vec<String>,
    embedded: Option<EmbeddedBroker>,
    proxy: Option<FaultProxy>,
    faults: Vec<Fault>,
    applied: Option<Vec<AppliedFault>>,
    endpoint: Option<Endpoint>,
    /// The run's stop: signals and the embedded broker's exit ask it.
    pub stop: Stop,
    interrupted: bool,
}

impl Harness {
    /// The run's broker: the cluster `bootstrap` names, else the embedded broker — for a fault
    /// schedule the one the schedule acts on (behind the fault proxy when it has network faults).
    /// `endpoint` (`--metrics-listen`) is kept until [`Harness::finish`].
    pub async fn start(
        faults: Vec<Fault>,
        bootstrap: Option<&str>,
        endpoint: Option<Endpoint>,
    ) -> Result<Harness, CliError> {
        let started = crate::faults::start(&faults, bootstrap).await;
        let (servers, embedded, proxy) = match started {
            Ok(t) => t,
            Err((code, e)) => {
                if let Some(e) = endpoint {
                    e.finish().await;
                }
                return Err(CliError::with_code(code, e));
            }
        };
        Ok(Harness {
            servers,
            embedded,
            proxy,
            faults,
            applied: None,
            endpoint,
            stop: Stop::new(),
            interrupted: false,
        })
    }

    /// A run that needs no broker of kbench's (through a REST Proxy, which reaches Kafka itself).
    pub fn without_broker(servers: Vec<String>, endpoint: Option<Endpoint>) -> Harness {
        Harness {
            servers,
            embedded: None,
            proxy: None,
            faults: Vec::new(),
            applied: None,
            endpoint,
            stop: Stop::new(),
            interrupted: false,
        }
    }

    /// Whether kbench started the broker.
    pub fn embedded_broker(&self) -> bool {
        self.embedded.is_some()
    }

    /// The servers, as a user would write them.
    pub fn bootstrap(&self) -> String {
        self.servers.join(",")
    }

    /// Drive `job` to its end. A signal or the embedded broker's exit asks [`Harness::stop`] (with
    /// why); a fault schedule runs beside it from now, then owning the broker (a broker the
    /// schedule kills is not a reason to stop), and `recreate` puts the topic back after a restart.
    pub async fn run<T>(&mut self, job: impl Future<Output = T>, recreate: Option<Recreate>) -> T {
        let faults = std::mem::take(&mut self.faults);
        let ((out, interrupted), applied) = crate::faults::run_under(
            job,
            (faults, self.proxy.as_ref(), recreate),
            self.embedded.as_mut(),
            &self.stop,
        )
        .await;
        self.interrupted |= interrupted;
        self.applied = applied;
        out
    }

    /// Whether the user asked the stop (Ctrl-C, SIGTERM), rather than the broker's exit.
    pub fn interrupted(&self) -> bool {
        self.interrupted
    }

    /// The applied faults: one line each on stdout, and the document's `faults`.
    pub fn report_faults(&mut self, document: &mut serde_json::Value) {
        crate::faults::report(self.applied.take(), document);
    }

    /// Stop the embedded broker and the metrics endpoint (after its hold).
    pub async fn finish(self) {
        if let Some(b) = self.embedded {
            b.stop().await;
        }
        if let Some(e) = self.endpoint {
            e.finish().await;
        }
    }
}
