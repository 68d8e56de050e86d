//! `/v1/runs/{id}/events`: a run's timeline pushed as server-sent events, for the dashboard's live
//! charts. Each window of the run's timeline (1 s) is an `interval` event as it closes, in the
//! result document's `intervals` shape (`records_per_sec`, `mb_per_sec`, each histogram's p50, p90,
//! p99 and max in µs, …); the stream ends with one `end` event, the run as `/v1/runs` lists it,
//! once the run has ended (at once for a run already finished, after its stored intervals).
//! Nothing is added to the run's hot path: the windows are the ones `/metrics` is fed from.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use axum::extract::{Path as UrlPath, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use kbench_bench::timeline::{Window, WindowSink, intervals};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::serve::app::App;
use crate::serve::error::ApiError;
use crate::serve::registry::run_json;

/// The most windows a feed keeps (a day of 1 s windows); later ones are not pushed.
const MAX_WINDOWS: usize = 86_400;

/// A run's windows so far, as `intervals` entries, and a count that changes with each.
pub struct Feed {
    state: Mutex<FeedState>,
    count: watch::Sender<usize>,
}

#[derive(Default)]
struct FeedState {
    /// The first window's start (µs since the epoch): `t_s` counts from it.
    origin_us: Option<u64>,
    intervals: Vec<Value>,
}

impl Feed {
    pub fn new() -> Arc<Feed> {
        Arc::new(Feed {
            state: Mutex::default(),
            count: watch::Sender::new(0),
        })
    }

    /// What the run's timeline sends its windows to.
    pub fn sink(self: &Arc<Feed>) -> WindowSink {
        let feed = self.clone();
        WindowSink::new(move |w| feed.push(w))
    }

    fn push(&self, w: &Window) {
        let len = {
            let mut s = self.state.lock().expect("feed lock");
            if s.intervals.len() >= MAX_WINDOWS {
                return;
            }
            let origin = *s.origin_us.get_or_insert(w.start_us);
            let start = UNIX_EPOCH + Duration::from_micros(origin);
            let Some(interval) = intervals(start, w.counters, std::slice::from_ref(w)).pop() else {
                return;
            };
            s.intervals
                .push(serde_json::to_value(interval).unwrap_or(Value::Null));
            s.intervals.len()
        };
        self.count.send_replace(len);
    }

    /// The windows from the `from`th on.
    fn since(&self, from: usize) -> Vec<Value> {
        let s = self.state.lock().expect("feed lock");
        s.intervals
            .get(from..)
            .map(<[Value]>::to_vec)
            .unwrap_or_default()
    }
}

/// What the event stream keeps between events.
struct Stream {
    app: Arc<App>,
    id: String,
    feed: Arc<Feed>,
    count: watch::Receiver<usize>,
    done: watch::Receiver<bool>,
    closing: watch::Receiver<bool>,
    sent: usize,
    pending: VecDeque<Event>,
    ended: bool,
}

fn interval_event(mut v: Value, index: usize) -> Event {
    if let Some(map) = v.as_object_mut() {
        map.insert("index".into(), json!(index));
    }
    Event::default()
        .event("interval")
        .id(index.to_string())
        .data(v.to_string())
}

impl Stream {
    /// The next event, or `None` once the `end` event went out (or the server is closing).
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Some(e);
            }
            if self.ended {
                return None;
            }
            // Done is read before the feed: once the run is done, every window is in it.
            let done = *self.done.borrow_and_update();
            self.count.borrow_and_update();
            let fresh = self.feed.since(self.sent);
            if !fresh.is_empty() {
                for v in fresh {
                    self.pending.push_back(interval_event(v, self.sent));
                    self.sent += 1;
                }
                continue;
            }
            if done {
                self.finish();
                continue;
            }
            if *self.closing.borrow_and_update() {
                return None;
            }
            tokio::select! {
                r = self.count.changed() => if r.is_err() { self.ended = true },
                r = self.done.changed() => if r.is_err() { self.finish() },
                _ = self.closing.changed() => {}
            }
        }
    }

    /// The stored intervals of a run this server did not watch (read from the results
    /// directory), then the `end` event.
    fn finish(&mut self) {
        self.ended = true;
        let Ok((run, stored)) = self.app.runs.read_run(&self.id, |r| {
            let stored = r
                .result
                .as_ref()
                .and_then(|d| d.get("intervals"))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            (run_json(r, false), stored)
        }) else {
            return;
        };
        if self.sent == 0 {
            for v in stored {
                self.pending.push_back(interval_event(v, self.sent));
                self.sent += 1;
            }
        }
        self.pending
            .push_back(Event::default().event("end").data(run.to_string()));
    }
}

pub async fn events(
    State(app): State<Arc<App>>,
    UrlPath(id): UrlPath<String>,
) -> Result<Response, ApiError> {
    let (feed, done) = app.runs.feed(&id)?;
    let stream = Stream {
        count: feed.count.subscribe(),
        closing: app.closing.subscribe(),
        app,
        id,
        feed,
        done,
        sent: 0,
        pending: VecDeque::new(),
        ended: false,
    };
    let events = futures_util::stream::unfold(stream, |mut s| async move {
        s.next()
            .await
            .map(|e| (Ok::<Event, std::convert::Infallible>(e), s))
    });
    let mut r = Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response();
    r.headers_mut().insert(
        axum::http::header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("no-store"),
    );
    Ok(r)
}
