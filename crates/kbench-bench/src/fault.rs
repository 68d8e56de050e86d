//! Fault schedules (`--fault`): what goes wrong, and when, during a measured run. The schedule is
//! data; the front end applies it to the broker it started (pause, kill, restart) or to the fault
//! proxy it put in front of it (delay, loss), and records when each fault began and ended.

use std::time::Duration;

use serde::Serialize;

use crate::error::SpecError;
use crate::spec::parse_duration;

/// One fault.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum FaultAction {
    /// SIGSTOP the broker, SIGCONT it after this long.
    PauseBroker {
        #[serde(with = "secs")]
        for_: Duration,
    },
    /// SIGKILL the broker; it stays down.
    KillBroker,
    /// SIGKILL the broker and start it again on the same address (in-memory: it comes back empty;
    /// the run's topic is created again).
    RestartBroker,
    /// Hold every chunk of bytes between client and broker this long, each way.
    Delay {
        #[serde(with = "secs")]
        delay: Duration,
        #[serde(with = "opt_secs")]
        for_: Option<Duration>,
    },
    /// Hold a chunk for a TCP retransmission time-out (200 ms) with this probability, each way:
    /// what packet loss does to a TCP stream.
    Loss {
        percent: f64,
        #[serde(with = "opt_secs")]
        for_: Option<Duration>,
    },
    /// `consume --consumers`: this many more members join the group.
    ConsumerJoin { count: u32 },
    /// This many members commit, leave the group (LeaveGroup) and stop.
    ConsumerLeave { count: u32 },
    /// This many members stop dead: no commit, no LeaveGroup, no heartbeat — the coordinator's
    /// session timeout decides when the group notices.
    ConsumerCrash { count: u32 },
    /// This many members restart, as a rolling deploy restarts them: each closes as Java's
    /// consumer does (commits; a dynamic member leaves, a static one — `group.instance.id` — does
    /// not) and, once it has closed, a new member takes its place with its `group.instance.id`.
    ConsumerRestart { count: u32 },
}

mod secs {
    pub fn serialize<S: serde::Serializer>(
        d: &std::time::Duration,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
}

mod opt_secs {
    pub fn serialize<S: serde::Serializer>(
        d: &Option<std::time::Duration>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_f64(d.as_secs_f64()),
            None => s.serialize_none(),
        }
    }
}

impl FaultAction {
    /// Whether it acts on the connection (the fault proxy), not the broker process.
    pub fn is_network(&self) -> bool {
        matches!(self, FaultAction::Delay { .. } | FaultAction::Loss { .. })
    }

    /// Whether it acts on the group's members (the consume run applies it), not the broker.
    pub fn is_member(&self) -> bool {
        matches!(
            self,
            FaultAction::ConsumerJoin { .. }
                | FaultAction::ConsumerLeave { .. }
                | FaultAction::ConsumerCrash { .. }
                | FaultAction::ConsumerRestart { .. }
        )
    }
}

/// One scheduled fault: `at` after the run's start.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fault {
    /// The fault as given.
    pub spec: String,
    #[serde(with = "secs")]
    pub at: Duration,
    pub action: FaultAction,
}

/// The most faults in one schedule.
pub const MAX_FAULTS: usize = 64;
/// The latest a fault may start, and the longest it may last.
pub const MAX_FAULT_TIME: Duration = Duration::from_secs(7 * 86_400);

impl Fault {
    /// Parse `at=20s pause-broker=5s`, `at=10s kill-broker`, `at=10s restart-broker`,
    /// `at=5s delay=50ms [for=10s]`, `at=5s loss=1% [for=10s]` (space- or comma-separated).
    pub fn parse(text: &str) -> Result<Fault, SpecError> {
        let err = |why: String| SpecError::new("fault", format!("{text:?}: {why}"));
        let mut at = None;
        let mut action = None;
        let mut for_ = None;
        for part in text
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|p| !p.is_empty())
        {
            let (key, value) = match part.split_once('=') {
                Some((k, v)) => (k, Some(v)),
                None => (part, None),
            };
            let duration = |v: Option<&str>| -> Result<Duration, SpecError> {
                let v = v.ok_or_else(|| err(format!("{key} needs a duration, e.g. {key}=5s")))?;
                let d = parse_duration(v).map_err(|e| err(format!("{key}: {e}")))?;
                if d > MAX_FAULT_TIME {
                    return Err(err(format!("{key}: at most 7 days")));
                }
                Ok(d)
            };
            let set = |slot: &mut Option<FaultAction>, a: FaultAction| {
                if slot.is_some() {
                    return Err(err("one fault per --fault (give --fault again)".into()));
                }
                *slot = Some(a);
                Ok(())
            };
            match key {
                "at" => at = Some(duration(value)?),
                "for" => for_ = Some(duration(value)?),
                "pause-broker" => {
                    let d = duration(value)?;
                    if d.is_zero() {
                        return Err(err("pause-broker: must be above zero".into()));
                    }
                    set(&mut action, FaultAction::PauseBroker { for_: d })?
                }
                "kill-broker" | "restart-broker" if value.is_some() => {
                    return Err(err(format!("{key} takes no value")));
                }
                "kill-broker" => set(&mut action, FaultAction::KillBroker)?,
                "consumer-join" | "consumer-leave" | "consumer-crash" | "consumer-restart" => {
                    let count = value
                        .and_then(|v| v.parse::<u32>().ok())
                        .filter(|n| (1..=64).contains(n))
                        .ok_or_else(|| {
                            err(format!(
                                "{key} needs a count of members from 1 to 64, e.g. {key}=1"
                            ))
                        })?;
                    set(
                        &mut action,
                        match key {
                            "consumer-join" => FaultAction::ConsumerJoin { count },
                            "consumer-leave" => FaultAction::ConsumerLeave { count },
                            "consumer-restart" => FaultAction::ConsumerRestart { count },
                            _ => FaultAction::ConsumerCrash { count },
                        },
                    )?
                }
                "restart-broker" => set(&mut action, FaultAction::RestartBroker)?,
                "delay" => {
                    let d = duration(value)?;
                    if d > Duration::from_secs(60) {
                        return Err(err("delay: at most 60s".into()));
                    }
                    set(
                        &mut action,
                        FaultAction::Delay {
                            delay: d,
                            for_: None,
                        },
                    )?
                }
                "loss" => {
                    let v =
                        value.ok_or_else(|| err("loss needs a percentage, e.g. loss=1%".into()))?;
                    let p: f64 = v
                        .strip_suffix('%')
                        .ok_or_else(|| err(format!("loss: {v:?} is not a percentage (e.g. 1%)")))?
                        .parse()
                        .map_err(|_| err(format!("loss: {v:?} is not a percentage (e.g. 1%)")))?;
                    if !(p.is_finite() && (0.0..=100.0).contains(&p)) {
                        return Err(err(format!("loss: {p}% is outside 0..=100%")));
                    }
                    set(
                        &mut action,
                        FaultAction::Loss {
                            percent: p,
                            for_: None,
                        },
                    )?
                }
                other => {
                    return Err(err(format!(
                        "unknown {other:?} (at=, pause-broker=, kill-broker, restart-broker, delay=, loss=, for=, consumer-join=, consumer-leave=, consumer-crash=, consumer-restart=)"
                    )));
                }
            }
        }
        let at = at.ok_or_else(|| err("when? give at=DURATION (e.g. at=20s)".into()))?;
        let mut action = action.ok_or_else(|| {
            err("what? pause-broker=, kill-broker, restart-broker, delay=, loss=, consumer-join=, consumer-leave=, consumer-crash= or consumer-restart=".into())
        })?;
        match (&mut action, for_) {
            (FaultAction::Delay { for_: f, .. } | FaultAction::Loss { for_: f, .. }, Some(d)) => {
                *f = Some(d)
            }
            (_, Some(_)) => {
                return Err(err(
                    "for= is for delay and loss (pause-broker=D says how long itself)".into(),
                ));
            }
            _ => {}
        }
        Ok(Fault {
            spec: text.trim().to_string(),
            at,
            action,
        })
    }
}

/// Parse every `--fault`, in time order.
pub fn parse_schedule(texts: &[String]) -> Result<Vec<Fault>, SpecError> {
    if texts.len() > MAX_FAULTS {
        return Err(SpecError::new(
            "fault",
            format!("{} faults; at most {MAX_FAULTS}", texts.len()),
        ));
    }
    let mut faults = texts
        .iter()
        .map(|t| Fault::parse(t))
        .collect::<Result<Vec<_>, _>>()?;
    faults.sort_by_key(|f| f.at);
    Ok(faults)
}

/// A fault as it happened: when it began and ended (seconds from the run's start), and what went
/// wrong applying it.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct AppliedFault {
    pub fault: String,
    pub kind: String,
    /// Seconds from the start of the run.
    pub began_s: Option<f64>,
    pub ended_s: Option<f64>,
    pub began_at: Option<String>,
    pub ended_at: Option<String>,
    pub error: Option<String>,
}

impl FaultAction {
    pub fn kind(&self) -> &'static str {
        match self {
            FaultAction::PauseBroker { .. } => "pause-broker",
            FaultAction::KillBroker => "kill-broker",
            FaultAction::RestartBroker => "restart-broker",
            FaultAction::Delay { .. } => "delay",
            FaultAction::Loss { .. } => "loss",
            FaultAction::ConsumerJoin { .. } => "consumer-join",
            FaultAction::ConsumerLeave { .. } => "consumer-leave",
            FaultAction::ConsumerCrash { .. } => "consumer-crash",
            FaultAction::ConsumerRestart { .. } => "consumer-restart",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_faults_parse_with_a_count() {
        let f = Fault::parse("at=2s consumer-join=2").unwrap();
        assert_eq!(f.action, FaultAction::ConsumerJoin { count: 2 });
        assert!(f.action.is_member() && !f.action.is_network());
        assert_eq!(
            Fault::parse("at=1s consumer-crash=1")
                .unwrap()
                .action
                .kind(),
            "consumer-crash"
        );
        assert_eq!(
            Fault::parse("at=1s consumer-restart=2").unwrap().action,
            FaultAction::ConsumerRestart { count: 2 }
        );
        for bad in [
            "at=1s consumer-leave",
            "at=1s consumer-leave=0",
            "at=1s consumer-leave=x",
        ] {
            let e = Fault::parse(bad).unwrap_err();
            assert!(e.reason.contains("consumer-leave needs a count"), "{e:?}");
        }
    }

    #[test]
    fn the_forms_of_the_issue_parse() {
        let f = Fault::parse("at=20s pause-broker=5s").unwrap();
        assert_eq!(f.at, Duration::from_secs(20));
        assert_eq!(
            f.action,
            FaultAction::PauseBroker {
                for_: Duration::from_secs(5)
            }
        );
        assert_eq!(
            Fault::parse("at=1s,kill-broker").unwrap().action,
            FaultAction::KillBroker
        );
        assert_eq!(
            Fault::parse("restart-broker at=2500ms").unwrap().action,
            FaultAction::RestartBroker
        );
        assert_eq!(
            Fault::parse("at=0s delay=50ms for=10s").unwrap().action,
            FaultAction::Delay {
                delay: Duration::from_millis(50),
                for_: Some(Duration::from_secs(10))
            }
        );
        assert_eq!(
            Fault::parse("at=3s loss=1%").unwrap().action,
            FaultAction::Loss {
                percent: 1.0,
                for_: None
            }
        );
        let s = parse_schedule(&["at=9s kill-broker".into(), "at=1s delay=1ms".into()]).unwrap();
        assert_eq!(s[0].at, Duration::from_secs(1));
    }

    #[test]
    fn bad_faults_name_the_flag_and_the_problem() {
        for (text, says) in [
            ("pause-broker=5s", "at="),
            ("at=5s", "what?"),
            ("at=5s pause-broker", "needs a duration"),
            ("at=5s pause-broker=0s", "above zero"),
            ("at=5s kill-broker=3s", "takes no value"),
            ("at=5s kill-broker restart-broker", "one fault per"),
            ("at=5s loss=2", "not a percentage"),
            ("at=5s loss=200%", "outside"),
            ("at=5s loss=NaN%", "outside"),
            ("at=5s explode", "unknown"),
            ("at=5s kill-broker for=3s", "for= is for delay"),
            ("at=99999999h kill-broker", "7 days"),
            ("at=1s delay=2m", "60s"),
        ] {
            let e = Fault::parse(text).unwrap_err();
            assert_eq!(e.field, "fault", "{text}");
            assert!(e.to_string().contains(says), "{text}: {e}");
        }
        let many: Vec<String> = (0..65).map(|i| format!("at={i}s kill-broker")).collect();
        assert!(parse_schedule(&many).is_err());
    }
}
