//! `--store DB`: a workload's result kept in the results store (`kbench_bench::history`), with the
//! build under test and the target's label beside it. A leaf helper of every command that writes a
//! result, and of `kbench history import`.

use clap::Args;
use kbench_bench::history::{RunMeta, Store};

use crate::harness::CliError;

/// Where a workload's result is kept (`--store`), and what the store records beside it.
#[derive(Debug, Clone, Default, Args)]
pub struct StoreArgs {
    /// Keep the result in a results store: an SQLite file (created if absent), or a postgres://
    /// URL (`kbench history` reads it).
    #[arg(long, value_name = "DB")]
    pub store: Option<String>,
    /// The build under test, as the store records it (default: the git commit of the current
    /// directory, when it is in a repository).
    #[arg(long, value_name = "LABEL")]
    pub build_label: Option<String>,
    /// The target's name in the store (default: the bootstrap servers, `embedded` for kbench's
    /// own broker).
    #[arg(long, value_name = "LABEL")]
    pub target_label: Option<String>,
}

impl StoreArgs {
    /// Open the store before any load (a bad path, or a store of a newer kbench, is said now).
    pub fn check(&self) -> Result<(), String> {
        if self.store.is_none() {
            for (flag, given) in [
                ("--build-label", self.build_label.is_some()),
                ("--target-label", self.target_label.is_some()),
            ] {
                if given {
                    return Err(format!("{flag} labels what --store keeps; give --store DB"));
                }
            }
            return Ok(());
        }
        Store::open(self.store.as_deref().unwrap_or_default())
            .map(drop)
            .map_err(|e| e.to_string())
    }

    pub fn open(&self) -> Result<Store, CliError> {
        let location = self.store.as_deref().unwrap_or_default();
        Store::open(location).map_err(CliError::usage)
    }

    pub fn meta(&self, source: Option<String>) -> RunMeta {
        RunMeta {
            build_label: self.build_label.clone().or_else(git_commit),
            target_label: self.target_label.clone(),
            source,
        }
    }

    /// Keep a run's result document, when `--store` is given; says what was stored. A store that
    /// fails is the run's failure (exit 1), after its result files are written.
    pub fn keep<T: serde::Serialize>(&self, doc: &T) -> Result<(), CliError> {
        self.try_keep(doc).map_err(CliError::failed)
    }

    /// [`StoreArgs::keep`], its failure as one sentence.
    pub fn try_keep<T: serde::Serialize>(&self, doc: &T) -> Result<(), String> {
        let Some(location) = self.store.as_deref() else {
            return Ok(());
        };
        let text = serde_json::to_string(doc).map_err(|e| e.to_string())?;
        let mut store =
            Store::open(location).map_err(|e| format!("{e} (the run's result was not stored)"))?;
        let stored = store
            .record(&text, &self.meta(None))
            .map_err(|e| format!("{e} (the run's result was not stored)"))?;
        let keys: Vec<&str> = stored.runs.iter().map(|(k, _)| k.as_str()).collect();
        // The store as it may be shown: a URL without its password.
        eprintln!(
            "kbench: stored in {}: benchmark {}",
            store.location(),
            keys.join(", ")
        );
        Ok(())
    }
}

/// The git commit of the current directory (12 digits, `-dirty` when it has changes), if it is in
/// a repository and git is here.
fn git_commit() -> Option<String> {
    let run = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = run(&["rev-parse", "--short=12", "HEAD"]).filter(|c| !c.is_empty())?;
    let dirty =
        run(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    Some(if dirty {
        format!("{commit}-dirty")
    } else {
        commit
    })
}
