//! TEST DOUBLE — a stand-in for Confluent Schema Registry, written from its published API reference
//! (docs.confluent.io, "Schema Registry API Reference"), because no real registry can run on this
//! machine. It is not part of kbench.
//!
//! What it keeps of the real one: schema ids global and reused (the same schema under two subjects
//! has one id), versions per subject, `BACKWARD` compatibility by default checked against the
//! subject's latest version (apache-avro's `SchemaCompatibility::can_read`, the new schema reading
//! the old one's data), `PUT /config[/{subject}]` to change it, the error codes (40401 subject not
//! found, 40402 version not found, 40403 schema not found, 409 incompatible, 42201 invalid schema,
//! 401 unauthorized), HTTP basic auth on every endpoint when configured, the
//! `application/vnd.schemaregistry.v1+json` media type, and its awkward timing: a registration is
//! answered only after `register_delay` (the real one writes to its `_schemas` topic and waits to
//! read it back). `AVRO` (the default `schemaType`), `PROTOBUF` and `JSON`: a `.proto` is checked by
//! compiling it (protox, through kbench-bench's `schema::proto::compile`), a JSON Schema by parsing
//! it as a JSON object; compatibility is checked for Avro only (a new `.proto` or JSON Schema under
//! a subject is always a new version, but a subject's schema type cannot change: 409); another
//! `schemaType` is refused 42201.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use serde_json::{Value, json};

const MEDIA: &str = "application/vnd.schemaregistry.v1+json";

/// How the double behaves.
#[derive(Debug, Clone, Default)]
pub struct RegistryOptions {
    /// HTTP basic credentials every request must carry.
    pub basic_auth: Option<(String, String)>,
    /// How long a registration takes to be answered.
    pub register_delay: Duration,
}

#[derive(Default)]
struct Inner {
    options: RegistryOptions,
    state: Mutex<RegistryState>,
}

/// A schema as registered: its `schemaType` (`None`: Avro) and text.
#[derive(Clone)]
struct Stored {
    kind: Option<String>,
    text: String,
}

impl Stored {
    /// Its fields in an answer: `schema`, and `schemaType` unless Avro.
    fn json(&self) -> Value {
        match &self.kind {
            Some(k) => json!({ "schema": self.text, "schemaType": k }),
            None => json!({ "schema": self.text }),
        }
    }
}

#[derive(Default)]
struct RegistryState {
    /// Schemas by id (id = index + 1).
    schemas: Vec<Stored>,
    /// Subject → schema ids, oldest version first.
    subjects: BTreeMap<String, Vec<usize>>,
    /// `BACKWARD` unless set; per subject over global.
    global_compatibility: Option<String>,
    compatibility: BTreeMap<String, String>,
    /// Requests seen, as "METHOD path".
    requests: Vec<String>,
}

/// A running double.
pub struct SchemaRegistryDouble {
    pub url: String,
    inner: Arc<Inner>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SchemaRegistryDouble {
    pub fn start(options: RegistryOptions) -> SchemaRegistryDouble {
        let inner = Arc::new(Inner {
            options,
            state: Mutex::new(RegistryState::default()),
        });
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let served = inner.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let port = listener.local_addr().unwrap().port();
                tx.send(format!("http://127.0.0.1:{port}")).unwrap();
                let app = Router::new()
                    .route("/subjects", get(list_subjects))
                    .route("/subjects/{subject}", post(lookup))
                    .route(
                        "/subjects/{subject}/versions",
                        get(list_versions).post(register),
                    )
                    .route("/subjects/{subject}/versions/{version}", get(version))
                    .route("/schemas/ids/{id}", get(schema_by_id))
                    .route("/config", get(get_global).put(put_global))
                    .route("/config/{subject}", get(get_subject).put(put_subject))
                    .fallback(|| async { error(StatusCode::NOT_FOUND, 404, "HTTP 404 Not Found") })
                    .layer(middleware::from_fn_with_state(served.clone(), guard))
                    .with_state(served);
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = stop_rx.await;
                    })
                    .await;
            });
        });
        let url = rx.recv().expect("registry double started");
        SchemaRegistryDouble {
            url,
            inner,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// Register an Avro schema as a client would have before the test (no delay, no checks).
    pub fn preload(&self, subject: &str, schema: &str) -> usize {
        let mut s = self.inner.state.lock().unwrap();
        let id = s.id_of(&Stored {
            kind: None,
            text: schema.to_string(),
        });
        s.subjects.entry(subject.to_string()).or_default().push(id);
        id
    }

    /// The subjects and their schema ids, oldest version first.
    pub fn subjects(&self) -> BTreeMap<String, Vec<usize>> {
        self.inner.state.lock().unwrap().subjects.clone()
    }

    /// Requests seen, as "METHOD path".
    pub fn requests(&self) -> Vec<String> {
        self.inner.state.lock().unwrap().requests.clone()
    }
}

impl Drop for SchemaRegistryDouble {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl RegistryState {
    /// The id of `schema` (by canonical form), given a new one when unseen.
    fn id_of(&mut self, schema: &Stored) -> usize {
        let wanted = canonical(schema);
        match self
            .schemas
            .iter()
            .position(|s| wanted.is_some() && canonical(s) == wanted)
        {
            Some(i) => i + 1,
            None => {
                self.schemas.push(schema.clone());
                self.schemas.len()
            }
        }
    }

    fn compatibility_of(&self, subject: &str) -> String {
        self.compatibility
            .get(subject)
            .or(self.global_compatibility.as_ref())
            .cloned()
            .unwrap_or_else(|| "BACKWARD".into())
    }
}

fn canonical(schema: &Stored) -> Option<String> {
    match &schema.kind {
        Some(k) => Some(format!("{k}:{}", schema.text.trim())),
        None => apache_avro::Schema::parse_str(&schema.text)
            .ok()
            .map(|s| s.canonical_form()),
    }
}

async fn guard(State(inner): State<Arc<Inner>>, request: Request, next: Next) -> Response {
    inner.state.lock().unwrap().requests.push(format!(
        "{} {}",
        request.method(),
        request.uri().path()
    ));
    if let Some((user, password)) = &inner.options.basic_auth {
        let expected = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
        );
        let given = request
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok());
        if given != Some(expected.as_str()) {
            return error(StatusCode::UNAUTHORIZED, 401, "Unauthorized");
        }
    }
    next.run(request).await
}

/// An error answer's parts: the status, the registry's code, the message.
type Refusal = (StatusCode, i64, String);

fn refusal(status: StatusCode, code: i64, message: &str) -> Refusal {
    (status, code, message.to_string())
}

fn error(status: StatusCode, code: i64, message: &str) -> Response {
    (
        status,
        [("Content-Type", MEDIA)],
        json!({ "error_code": code, "message": message }).to_string(),
    )
        .into_response()
}

fn ok(body: Value) -> Response {
    (StatusCode::OK, [("Content-Type", MEDIA)], body.to_string()).into_response()
}

/// The body's `schema`, checked: Avro or Protobuf, and parseable.
fn schema_of(body: &Bytes) -> Result<Stored, Refusal> {
    let body: Value = serde_json::from_slice(body).map_err(|_| {
        refusal(
            StatusCode::UNPROCESSABLE_ENTITY,
            42201,
            "Either the input schema or one its references is invalid",
        )
    })?;
    let kind = match body["schemaType"].as_str() {
        None | Some("AVRO") => None,
        Some(t @ ("PROTOBUF" | "JSON")) => Some(t.to_string()),
        Some(t) => {
            return Err(refusal(
                StatusCode::UNPROCESSABLE_ENTITY,
                42201,
                &format!("Invalid schema: unknown schemaType {t}"),
            ));
        }
    };
    let Some(schema) = body["schema"].as_str() else {
        return Err(refusal(
            StatusCode::UNPROCESSABLE_ENTITY,
            42201,
            "Empty schema",
        ));
    };
    if kind.as_deref() == Some("JSON") {
        if !serde_json::from_str::<Value>(schema).is_ok_and(|v| v.is_object() || v.is_boolean()) {
            return Err(refusal(
                StatusCode::UNPROCESSABLE_ENTITY,
                42201,
                &format!("Invalid schema {schema}, details: not a JSON Schema"),
            ));
        }
        return Ok(Stored {
            kind,
            text: schema.to_string(),
        });
    }
    if kind.is_some() {
        if let Err(e) = kbench_bench::schema::proto::compile(schema) {
            return Err(refusal(
                StatusCode::UNPROCESSABLE_ENTITY,
                42201,
                &format!("Invalid schema {schema}, details: {e}"),
            ));
        }
        return Ok(Stored {
            kind,
            text: schema.to_string(),
        });
    }
    if let Err(e) = apache_avro::Schema::parse_str(schema) {
        return Err(refusal(
            StatusCode::UNPROCESSABLE_ENTITY,
            42201,
            &format!("Invalid schema {schema}, details: {e}"),
        ));
    }
    Ok(Stored {
        kind: None,
        text: schema.to_string(),
    })
}

async fn register(
    State(inner): State<Arc<Inner>>,
    Path(subject): Path<String>,
    body: Bytes,
) -> Response {
    let schema = match schema_of(&body) {
        Ok(s) => s,
        Err((status, code, message)) => return error(status, code, &message),
    };
    tokio::time::sleep(inner.options.register_delay).await;
    let mut s = inner.state.lock().unwrap();
    let canonical_new = canonical(&schema);
    let versions = s.subjects.get(&subject).cloned().unwrap_or_default();
    // Already a version of this subject: its id, nothing registered.
    if let Some(&id) = versions
        .iter()
        .find(|&&id| canonical(&s.schemas[id - 1]) == canonical_new)
    {
        return ok(json!({ "id": id }));
    }
    // A subject's schemas keep one type (the registry refuses another unless compatibility is
    // NONE).
    if let Some(&latest) = versions.last()
        && s.schemas[latest - 1].kind != schema.kind
        && s.compatibility_of(&subject) != "NONE"
    {
        return error(
            StatusCode::CONFLICT,
            409,
            &format!(
                "Schema being registered is incompatible with an earlier schema for subject \"{subject}\", details: [Incompatible because of different schema type]"
            ),
        );
    }
    if let Some(&latest) = versions.last()
        && schema.kind.is_none()
        && s.schemas[latest - 1].kind.is_none()
    {
        let level = s.compatibility_of(&subject);
        let old = apache_avro::Schema::parse_str(&s.schemas[latest - 1].text).unwrap();
        let new = apache_avro::Schema::parse_str(&schema.text).unwrap();
        let check = match level.as_str() {
            "NONE" => Ok(()),
            "FORWARD" | "FORWARD_TRANSITIVE" => {
                apache_avro::schema_compatibility::SchemaCompatibility::can_read(&new, &old)
            }
            "FULL" | "FULL_TRANSITIVE" => {
                apache_avro::schema_compatibility::SchemaCompatibility::mutual_read(&new, &old)
            }
            _ => apache_avro::schema_compatibility::SchemaCompatibility::can_read(&old, &new),
        };
        if let Err(e) = check {
            return error(
                StatusCode::CONFLICT,
                409,
                &format!(
                    "Schema being registered is incompatible with an earlier schema for subject \"{subject}\", details: [{e}]"
                ),
            );
        }
    }
    let id = s.id_of(&schema);
    s.subjects.entry(subject).or_default().push(id);
    ok(json!({ "id": id }))
}

async fn lookup(
    State(inner): State<Arc<Inner>>,
    Path(subject): Path<String>,
    body: Bytes,
) -> Response {
    let schema = match schema_of(&body) {
        Ok(s) => s,
        Err((status, code, message)) => return error(status, code, &message),
    };
    let s = inner.state.lock().unwrap();
    let Some(versions) = s.subjects.get(&subject) else {
        return error(
            StatusCode::NOT_FOUND,
            40401,
            &format!("Subject '{subject}' not found."),
        );
    };
    let wanted = canonical(&schema);
    match versions
        .iter()
        .enumerate()
        .find(|(_, id)| canonical(&s.schemas[**id - 1]) == wanted)
    {
        Some((i, &id)) => {
            let mut answer = s.schemas[id - 1].json();
            answer["subject"] = json!(subject);
            answer["id"] = json!(id);
            answer["version"] = json!(i + 1);
            ok(answer)
        }
        None => error(StatusCode::NOT_FOUND, 40403, "Schema not found"),
    }
}

async fn list_subjects(State(inner): State<Arc<Inner>>) -> Response {
    let s = inner.state.lock().unwrap();
    ok(json!(s.subjects.keys().collect::<Vec<_>>()))
}

async fn list_versions(State(inner): State<Arc<Inner>>, Path(subject): Path<String>) -> Response {
    let s = inner.state.lock().unwrap();
    match s.subjects.get(&subject) {
        Some(v) => ok(json!((1..=v.len()).collect::<Vec<_>>())),
        None => error(
            StatusCode::NOT_FOUND,
            40401,
            &format!("Subject '{subject}' not found."),
        ),
    }
}

async fn version(
    State(inner): State<Arc<Inner>>,
    Path((subject, version)): Path<(String, String)>,
) -> Response {
    let s = inner.state.lock().unwrap();
    let Some(versions) = s.subjects.get(&subject) else {
        return error(
            StatusCode::NOT_FOUND,
            40401,
            &format!("Subject '{subject}' not found."),
        );
    };
    let index = match version.as_str() {
        "latest" | "-1" => versions.len().checked_sub(1),
        v => v
            .parse::<usize>()
            .ok()
            .and_then(|v| v.checked_sub(1))
            .filter(|i| *i < versions.len()),
    };
    match index {
        Some(i) => {
            let id = versions[i];
            let mut answer = s.schemas[id - 1].json();
            answer["subject"] = json!(subject);
            answer["id"] = json!(id);
            answer["version"] = json!(i + 1);
            ok(answer)
        }
        None => error(StatusCode::NOT_FOUND, 40402, "Version not found."),
    }
}

async fn schema_by_id(State(inner): State<Arc<Inner>>, Path(id): Path<String>) -> Response {
    let s = inner.state.lock().unwrap();
    match id
        .parse::<usize>()
        .ok()
        .and_then(|i| s.schemas.get(i.checked_sub(1)?))
    {
        Some(schema) => ok(schema.json()),
        None => error(
            StatusCode::NOT_FOUND,
            40403,
            &format!("Schema {id} not found"),
        ),
    }
}

async fn get_global(State(inner): State<Arc<Inner>>) -> Response {
    let s = inner.state.lock().unwrap();
    ok(
        json!({ "compatibilityLevel": s.global_compatibility.clone().unwrap_or_else(|| "BACKWARD".into()) }),
    )
}

async fn put_global(State(inner): State<Arc<Inner>>, body: Bytes) -> Response {
    let level = match level_of(&body) {
        Ok(l) => l,
        Err((status, code, message)) => return error(status, code, &message),
    };
    inner.state.lock().unwrap().global_compatibility = Some(level.clone());
    ok(json!({ "compatibility": level }))
}

async fn get_subject(State(inner): State<Arc<Inner>>, Path(subject): Path<String>) -> Response {
    let s = inner.state.lock().unwrap();
    match s.compatibility.get(&subject) {
        Some(l) => ok(json!({ "compatibilityLevel": l })),
        None => error(
            StatusCode::NOT_FOUND,
            40408,
            &format!("Subject '{subject}' does not have subject-level compatibility configured"),
        ),
    }
}

async fn put_subject(
    State(inner): State<Arc<Inner>>,
    Path(subject): Path<String>,
    body: Bytes,
) -> Response {
    let level = match level_of(&body) {
        Ok(l) => l,
        Err((status, code, message)) => return error(status, code, &message),
    };
    inner
        .state
        .lock()
        .unwrap()
        .compatibility
        .insert(subject, level.clone());
    ok(json!({ "compatibility": level }))
}

fn level_of(body: &Bytes) -> Result<String, Refusal> {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let level = v["compatibility"].as_str().unwrap_or("").to_string();
    let known = [
        "NONE",
        "BACKWARD",
        "BACKWARD_TRANSITIVE",
        "FORWARD",
        "FORWARD_TRANSITIVE",
        "FULL",
        "FULL_TRANSITIVE",
    ];
    if known.contains(&level.as_str()) {
        Ok(level)
    } else {
        Err(refusal(
            StatusCode::UNPROCESSABLE_ENTITY,
            42203,
            "Invalid compatibility level",
        ))
    }
}
