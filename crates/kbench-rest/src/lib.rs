//! A Kafka REST Proxy client (Confluent REST Proxy API v2 and v3; Karapace's v2), and Schema
//! Registry registration: the HTTP conversations the REST Proxy driver needs. Like the Kafka
//! conversations in kbench-client it moves requests and says what happened to them; it never
//! measures, and it knows nothing of the Kafka protocol.
//!
//! Real proxies differ from the reference, and both are handled: a missing `error_code` on a produce
//! offset means success (Karapace); a per-record error may be a 5-digit REST code or a Kafka code; a
//! 404 on `/v3/...` means the proxy has no v3 API; a commit always carries explicit offsets.

mod redact;

use std::time::Duration;

use serde_json::{Value, json};

pub use redact::{redact_text, redact_url, userinfo};

/// The embedded format of record values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestFormat {
    Avro,
    /// Confluent's `protobuf` embedded format: values as Protobuf's JSON mapping, encoded by the
    /// proxy with the schema `value_schema_id` names.
    Protobuf,
    /// Confluent's `jsonschema` embedded format: JSON values checked by the proxy against the
    /// JSON Schema `value_schema_id` names.
    JsonSchema,
    Json,
    Binary,
}

impl RestFormat {
    pub fn name(self) -> &'static str {
        match self {
            RestFormat::Avro => "avro",
            RestFormat::Protobuf => "protobuf",
            RestFormat::JsonSchema => "jsonschema",
            RestFormat::Json => "json",
            RestFormat::Binary => "binary",
        }
    }

    /// Whether values are encoded by the proxy with a schema from the registry (avro, protobuf,
    /// jsonschema): they need a `value_schema_id`.
    pub fn has_schema(self) -> bool {
        matches!(
            self,
            RestFormat::Avro | RestFormat::Protobuf | RestFormat::JsonSchema
        )
    }

    /// The v3 API's value `type`.
    pub fn v3_type(self) -> &'static str {
        match self {
            RestFormat::Avro => "AVRO",
            RestFormat::Protobuf => "PROTOBUF",
            RestFormat::JsonSchema => "JSONSCHEMA",
            RestFormat::Json => "JSON",
            RestFormat::Binary => "BINARY",
        }
    }

    /// The Schema Registry's `schemaType` of the format's schemas (none for Avro, the default).
    pub fn schema_type(self) -> Option<&'static str> {
        match self {
            RestFormat::Protobuf => Some("PROTOBUF"),
            RestFormat::JsonSchema => Some("JSON"),
            _ => None,
        }
    }

    /// `application/vnd.kafka.{format}.v2+json`.
    pub fn v2_content_type(self) -> String {
        format!("application/vnd.kafka.{}.v2+json", self.name())
    }
}

impl std::str::FromStr for RestFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "avro" => Ok(RestFormat::Avro),
            "protobuf" => Ok(RestFormat::Protobuf),
            "jsonschema" => Ok(RestFormat::JsonSchema),
            "json" => Ok(RestFormat::Json),
            "binary" => Ok(RestFormat::Binary),
            other => Err(format!(
                "unknown format {other:?} (avro, protobuf, jsonschema, json or binary)"
            )),
        }
    }
}

/// Media type for v2 requests and answers without embedded data.
pub const V2_JSON: &str = "application/vnd.kafka.v2+json";
const REGISTRY_JSON: &str = "application/vnd.schemaregistry.v1+json";

/// Why a REST call did not succeed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RestError {
    /// No HTTP answer (refused, reset, timed out, TLS).
    #[error("{url}: {reason}")]
    Transport { url: String, reason: String },
    /// An HTTP error status, with the proxy's `{error_code, message}` when it sent one.
    #[error("{url}: HTTP {status}{}", describe_code(*.code, .message))]
    Status {
        url: String,
        status: u16,
        code: Option<i64>,
        message: String,
    },
    /// A 2xx answer kbench could not read.
    #[error("{url}: unexpected answer: {reason}")]
    Body { url: String, reason: String },
    /// The proxy has no v3 API (404 on /v3/...), as Karapace.
    #[error("{url}: this proxy has no v3 produce API (404 on /v3); use --rest-api v2")]
    NoV3 { url: String },
}

fn describe_code(code: Option<i64>, message: &str) -> String {
    match code {
        Some(c) => format!(", error_code {c}: {message}"),
        None if message.is_empty() => String::new(),
        None => format!(": {message}"),
    }
}

impl RestError {
    /// The REST (5-digit) or HTTP code, for counting errors by kind.
    pub fn code(&self) -> Option<i64> {
        match self {
            RestError::Status { code, status, .. } => Some(code.unwrap_or(i64::from(*status))),
            _ => None,
        }
    }

    /// 429 / 42901: too many requests, back off and count.
    pub fn is_throttle(&self) -> bool {
        matches!(self, RestError::Status { status: 429, .. }) || self.code() == Some(42901)
    }

    /// 40403: the consumer instance expired or is unknown; recreate it.
    pub fn is_instance_gone(&self) -> bool {
        self.code() == Some(40403)
    }
}

/// How to reach the proxy.
#[derive(Clone, PartialEq)]
pub struct RestConfig {
    /// Base URL, e.g. `http://127.0.0.1:8082` (a trailing slash is fine).
    pub url: String,
    /// HTTP basic credentials; the password is never formatted anywhere.
    pub basic_auth: Option<(String, String)>,
    pub timeout: Duration,
    /// Extra trusted root certificate(s), PEM, for https proxies signed by a private CA.
    pub ca_cert_pem: Option<Vec<u8>>,
}

impl std::fmt::Debug for RestConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestConfig")
            .field("url", &self.url)
            .field("user", &self.basic_auth.as_ref().map(|(u, _)| u))
            .finish()
    }
}

/// One record's outcome in a produce answer.
#[derive(Debug, Clone, PartialEq)]
pub enum RecordOutcome {
    Ok {
        partition: i32,
        offset: i64,
    },
    /// A per-record error: a 5-digit REST code or a Kafka error code, with its message.
    Failed {
        code: i64,
        message: String,
    },
}

/// A record read by a consumer instance.
#[derive(Debug, Clone)]
pub struct RestRecord {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub value: Value,
}

/// A consumer instance: where it lives.
#[derive(Debug, Clone)]
pub struct ConsumerInstance {
    pub group: String,
    pub instance_id: String,
    pub base_uri: String,
}

/// The REST Proxy client.
#[derive(Debug, Clone)]
pub struct RestProxy {
    http: reqwest::Client,
    config: RestConfig,
    base: String,
}

impl RestProxy {
    pub fn new(mut config: RestConfig) -> Result<RestProxy, RestError> {
        // Credentials in the URL become basic auth; the URL kept (and ever shown) has none.
        if let Some((user, password)) = userinfo(&config.url) {
            config.basic_auth.get_or_insert((user, password));
            config.url = redact_url(&config.url);
        }
        let base = config.url.trim_end_matches('/').to_string();
        let parsed = reqwest::Url::parse(&base).map_err(|e| RestError::Transport {
            url: base.clone(),
            reason: format!("not a URL: {e}"),
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(RestError::Transport {
                url: base,
                reason: "the URL must start with http:// or https://".into(),
            });
        }
        let mut builder = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(Duration::from_secs(10));
        if let Some(pem) = &config.ca_cert_pem {
            let certs =
                reqwest::Certificate::from_pem_bundle(pem).map_err(|e| RestError::Transport {
                    url: base.clone(),
                    reason: format!("CA certificate: {e}"),
                })?;
            if certs.is_empty() {
                return Err(RestError::Transport {
                    url: base,
                    reason: "CA certificate: no certificate in the PEM".into(),
                });
            }
            for c in certs {
                builder = builder.add_root_certificate(c);
            }
        }
        let http = builder.build().map_err(|e| RestError::Transport {
            url: base.clone(),
            reason: e.to_string(),
        })?;
        Ok(RestProxy { http, config, base })
    }

    pub fn base_url(&self) -> &str {
        &self.base
    }

    fn request(&self, method: reqwest::Method, url: &str) -> reqwest::RequestBuilder {
        let mut r = self.http.request(method, url);
        if let Some((user, password)) = &self.config.basic_auth {
            r = r.basic_auth(user, Some(password));
        }
        r
    }

    /// Send and read the answer: the status and the body as JSON (empty → null, non-JSON → a
    /// string); only a missing answer is an error here.
    async fn exchange(
        &self,
        url: &str,
        request: reqwest::RequestBuilder,
    ) -> Result<(u16, Value), RestError> {
        let response = request.send().await.map_err(transport(url))?;
        let status = response.status().as_u16();
        let text = response.text().await.map_err(transport(url))?;
        let body = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or_else(|_| Value::String(truncate(&text)))
        };
        Ok((status, body))
    }

    /// [`exchange`](Self::exchange), with non-2xx answers as [`RestError::Status`].
    async fn send(&self, url: &str, request: reqwest::RequestBuilder) -> Result<Value, RestError> {
        let (status, body) = self.exchange(url, request).await?;
        if (200..300).contains(&status) {
            return Ok(body);
        }
        Err(status_error(url, status, &body))
    }

    /// `GET url` expecting a v2 JSON answer.
    async fn get_v2(&self, url: &str) -> Result<Value, RestError> {
        let r = self
            .request(reqwest::Method::GET, url)
            .header("Accept", V2_JSON);
        self.send(url, r).await
    }

    /// `POST url` with a v2 JSON body; the answer is not needed.
    async fn post_v2(&self, url: &str, body: Value) -> Result<(), RestError> {
        let r = self
            .request(reqwest::Method::POST, url)
            .header("Content-Type", V2_JSON)
            .body(body.to_string());
        self.send(url, r).await.map(|_| ())
    }

    /// `POST {base_uri}/{path}` with `{"offsets": [{topic, partition, offset}…]}` (commits, seeks).
    async fn post_offsets(
        &self,
        c: &ConsumerInstance,
        path: &str,
        topic: &str,
        offsets: &[(i32, i64)],
    ) -> Result<(), RestError> {
        let list: Vec<Value> = offsets
            .iter()
            .map(|(p, o)| json!({ "topic": topic, "partition": p, "offset": o }))
            .collect();
        self.post_v2(
            &format!("{}/{path}", c.base_uri),
            json!({ "offsets": list }),
        )
        .await
    }

    /// Check the proxy answers before any load: `GET /topics`.
    pub async fn check(&self) -> Result<(), RestError> {
        self.get_v2(&format!("{}/topics", self.base))
            .await
            .map(|_| ())
    }

    /// v2 produce: one request with `values`, each record's outcome in order. An HTTP error fails the
    /// whole request; a 200 (or Karapace's 422) may still carry per-record errors.
    pub async fn produce_v2(
        &self,
        topic: &str,
        format: RestFormat,
        value_schema_id: Option<i64>,
        values: Vec<Value>,
    ) -> Result<Vec<RecordOutcome>, RestError> {
        let url = format!("{}/topics/{topic}", self.base);
        let n = values.len();
        let records: Vec<Value> = values.into_iter().map(|v| json!({ "value": v })).collect();
        let mut body = json!({ "records": records });
        if let Some(id) = value_schema_id {
            body["value_schema_id"] = json!(id);
        }
        let r = self
            .request(reqwest::Method::POST, &url)
            .header("Content-Type", format.v2_content_type())
            .header("Accept", V2_JSON)
            .body(body.to_string());
        let (status, answer) = self.exchange(&url, r).await?;
        match status {
            200..=299 => parse_offsets(&url, &answer, n),
            // Karapace: a bad partition is a 422 whose offsets carry per-record (Kafka) codes.
            422 if answer.get("offsets").is_some() => parse_offsets(&url, &answer, n),
            _ => Err(status_error(&url, status, &answer)),
        }
    }

    /// The v3 cluster id (`GET /v3/clusters`); a 404 means the proxy has no v3 API.
    pub async fn cluster_id(&self) -> Result<String, RestError> {
        let url = format!("{}/v3/clusters", self.base);
        let r = self
            .request(reqwest::Method::GET, &url)
            .header("Accept", "application/json");
        match self.send(&url, r).await {
            Ok(v) => v["data"]
                .as_array()
                .and_then(|d| d.first())
                .and_then(|c| c["cluster_id"].as_str())
                .map(str::to_string)
                .ok_or_else(|| RestError::Body {
                    url,
                    reason: "no cluster in data[]".into(),
                }),
            Err(RestError::Status { status: 404, .. }) => Err(RestError::NoV3 { url }),
            Err(e) => Err(e),
        }
    }

    /// v3 produce, one request per record.
    pub async fn produce_v3(
        &self,
        cluster_id: &str,
        topic: &str,
        format: RestFormat,
        value_schema_id: Option<i64>,
        value: Value,
    ) -> Result<RecordOutcome, RestError> {
        let url = format!(
            "{}/v3/clusters/{cluster_id}/topics/{topic}/records",
            self.base
        );
        let r = self
            .request(reqwest::Method::POST, &url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json")
            .body(v3_record(format, value_schema_id, value).to_string());
        match self.send(&url, r).await {
            Ok(v) => Ok(v3_outcome(&v)),
            Err(RestError::Status {
                status: 404, code, ..
            }) if code.is_none() => Err(RestError::NoV3 { url }),
            Err(e) => Err(e),
        }
    }

    /// v3 streaming produce: every record in one chunked request, one delivery report per record
    /// (in order), each checked.
    pub async fn produce_v3_stream(
        &self,
        cluster_id: &str,
        topic: &str,
        format: RestFormat,
        value_schema_id: Option<i64>,
        values: Vec<Value>,
    ) -> Result<Vec<RecordOutcome>, RestError> {
        let url = format!(
            "{}/v3/clusters/{cluster_id}/topics/{topic}/records",
            self.base
        );
        let n = values.len();
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> = values
            .into_iter()
            .map(|v| {
                Ok(v3_record(format, value_schema_id, v)
                    .to_string()
                    .into_bytes())
            })
            .collect();
        let body = reqwest::Body::wrap_stream(futures_util::stream::iter(chunks));
        let r = self
            .request(reqwest::Method::POST, &url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json")
            .body(body);
        let response = r.send().await.map_err(transport(&url))?;
        let status = response.status().as_u16();
        let text = response.text().await.map_err(transport(&url))?;
        if status == 404 {
            return Err(RestError::NoV3 { url });
        }
        if !(200..300).contains(&status) {
            let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            return Err(status_error(&url, status, &body));
        }
        let mut out = Vec::with_capacity(n);
        for report in serde_json::Deserializer::from_str(&text).into_iter::<Value>() {
            let report = report.map_err(|e| RestError::Body {
                url: url.clone(),
                reason: format!("delivery report: {e}"),
            })?;
            out.push(v3_outcome(&report));
        }
        if out.len() != n {
            return Err(RestError::Body {
                url,
                reason: format!("{} delivery reports for {n} records", out.len()),
            });
        }
        Ok(out)
    }

    /// Create a consumer instance in `group` (format matching the produced data, latest offsets, no
    /// auto-commit).
    pub async fn create_consumer(
        &self,
        group: &str,
        name: &str,
        format: RestFormat,
    ) -> Result<ConsumerInstance, RestError> {
        let url = format!("{}/consumers/{group}", self.base);
        let body = json!({
            "name": name,
            "format": format.name(),
            "auto.offset.reset": "latest",
            "auto.commit.enable": "false",
        });
        let r = self
            .request(reqwest::Method::POST, &url)
            .header("Content-Type", V2_JSON)
            .header("Accept", V2_JSON)
            .body(body.to_string());
        let v = self.send(&url, r).await?;
        let instance_id = v["instance_id"].as_str().unwrap_or(name).to_string();
        let base_uri = v["base_uri"]
            .as_str()
            .map(|s| s.trim_end_matches('/').to_string())
            .ok_or_else(|| RestError::Body {
                url: url.clone(),
                reason: "no base_uri".into(),
            })?;
        Ok(ConsumerInstance {
            group: group.to_string(),
            instance_id,
            base_uri,
        })
    }

    pub async fn subscribe(&self, c: &ConsumerInstance, topic: &str) -> Result<(), RestError> {
        self.post_v2(
            &format!("{}/subscription", c.base_uri),
            json!({ "topics": [topic] }),
        )
        .await
    }

    /// The topic's partitions: `GET /topics/{topic}/partitions`.
    pub async fn partitions(&self, topic: &str) -> Result<Vec<i32>, RestError> {
        let url = format!("{}/topics/{topic}/partitions", self.base);
        let v = self.get_v2(&url).await?;
        let list = v.as_array().ok_or_else(|| RestError::Body {
            url: url.clone(),
            reason: "partitions: not an array".into(),
        })?;
        list.iter()
            .map(|p| {
                p["partition"]
                    .as_i64()
                    .and_then(|p| i32::try_from(p).ok())
                    .ok_or_else(|| RestError::Body {
                        url: url.clone(),
                        reason: format!("partition without a number: {p}"),
                    })
            })
            .collect()
    }

    /// A partition's end offset (the next offset to be written):
    /// `GET /topics/{topic}/partitions/{partition}/offsets`.
    pub async fn end_offset(&self, topic: &str, partition: i32) -> Result<i64, RestError> {
        let url = format!(
            "{}/topics/{topic}/partitions/{partition}/offsets",
            self.base
        );
        let v = self.get_v2(&url).await?;
        v["end_offset"].as_i64().ok_or_else(|| RestError::Body {
            url,
            reason: "no end_offset".into(),
        })
    }

    /// The partitions of `topic` the instance holds now: `GET {base_uri}/assignments`. Empty until
    /// the instance has joined its group, which real proxies do lazily, over the first polls.
    pub async fn assignments(
        &self,
        c: &ConsumerInstance,
        topic: &str,
    ) -> Result<Vec<i32>, RestError> {
        let v = self.get_v2(&format!("{}/assignments", c.base_uri)).await?;
        let mut out: Vec<i32> = v["partitions"]
            .as_array()
            .map(|l| {
                l.iter()
                    .filter(|p| p["topic"].as_str() == Some(topic))
                    .filter_map(|p| p["partition"].as_i64())
                    .filter_map(|p| i32::try_from(p).ok())
                    .collect()
            })
            .unwrap_or_default();
        out.sort_unstable();
        Ok(out)
    }

    /// Assign partitions to the instance explicitly (no group membership): `POST {base_uri}/assignments`.
    pub async fn assign(
        &self,
        c: &ConsumerInstance,
        topic: &str,
        partitions: &[i32],
    ) -> Result<(), RestError> {
        let list: Vec<Value> = partitions
            .iter()
            .map(|p| json!({ "topic": topic, "partition": p }))
            .collect();
        self.post_v2(
            &format!("{}/assignments", c.base_uri),
            json!({ "partitions": list }),
        )
        .await
    }

    /// Set the next offset to read of assigned partitions: `POST {base_uri}/positions`.
    pub async fn seek(
        &self,
        c: &ConsumerInstance,
        topic: &str,
        offsets: &[(i32, i64)],
    ) -> Result<(), RestError> {
        self.post_offsets(c, "positions", topic, offsets).await
    }

    /// One poll: `GET {base_uri}/records?timeout=…&max_bytes=…` with the format's Accept header.
    pub async fn poll(
        &self,
        c: &ConsumerInstance,
        format: RestFormat,
        timeout_ms: u64,
        max_bytes: u64,
    ) -> Result<Vec<RestRecord>, RestError> {
        let url = format!(
            "{}/records?timeout={timeout_ms}&max_bytes={max_bytes}",
            c.base_uri
        );
        let r = self
            .request(reqwest::Method::GET, &url)
            .header("Accept", format.v2_content_type());
        let v = self.send(&url, r).await?;
        let Some(list) = v.as_array() else {
            return Err(RestError::Body {
                url,
                reason: "records: not an array".into(),
            });
        };
        let mut out = Vec::with_capacity(list.len());
        for r in list {
            out.push(RestRecord {
                topic: r["topic"].as_str().unwrap_or_default().to_string(),
                partition: r["partition"].as_i64().unwrap_or(-1) as i32,
                offset: r["offset"].as_i64().unwrap_or(-1),
                value: r["value"].clone(),
            });
        }
        Ok(out)
    }

    /// Commit explicit offsets (next offset to read per partition); never an empty body.
    pub async fn commit(
        &self,
        c: &ConsumerInstance,
        topic: &str,
        offsets: &[(i32, i64)],
    ) -> Result<(), RestError> {
        self.post_offsets(c, "offsets", topic, offsets).await
    }

    /// Delete the instance (a gone instance is not an error).
    pub async fn delete_consumer(&self, c: &ConsumerInstance) -> Result<(), RestError> {
        let url = c.base_uri.clone();
        let r = self
            .request(reqwest::Method::DELETE, &url)
            .header("Content-Type", V2_JSON);
        match self.send(&url, r).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_instance_gone() => Ok(()),
            Err(e) => Err(e),
        }
    }
}

fn status_error(url: &str, status: u16, body: &Value) -> RestError {
    RestError::Status {
        url: redact_url(url),
        status,
        code: body.get("error_code").and_then(Value::as_i64),
        // An upstream answer may echo what it was sent (an Authorization header, say).
        message: redact_text(
            body.get("message")
                .and_then(Value::as_str)
                .or_else(|| body.as_str())
                .unwrap_or_default(),
        ),
    }
}

fn v3_record(format: RestFormat, value_schema_id: Option<i64>, value: Value) -> Value {
    let mut v = json!({
        "value": {
            "type": format.v3_type(),
            "data": value,
        }
    });
    if let Some(id) = value_schema_id.filter(|_| format.has_schema()) {
        v["value"]["schema_id"] = json!(id);
    }
    v
}

/// A v3 delivery report: `error_code` 200 (or absent) is success.
fn v3_outcome(v: &Value) -> RecordOutcome {
    match v.get("error_code").and_then(Value::as_i64) {
        None | Some(200) => RecordOutcome::Ok {
            partition: v["partition_id"].as_i64().unwrap_or(-1) as i32,
            offset: v["offset"].as_i64().unwrap_or(-1),
        },
        Some(code) => RecordOutcome::Failed {
            code,
            message: v["message"].as_str().unwrap_or_default().to_string(),
        },
    }
}

/// Read a v2 produce answer's `offsets`: a null or absent `error_code` is success.
fn parse_offsets(url: &str, answer: &Value, n: usize) -> Result<Vec<RecordOutcome>, RestError> {
    let offsets = answer["offsets"]
        .as_array()
        .ok_or_else(|| RestError::Body {
            url: url.to_string(),
            reason: "no offsets[]".into(),
        })?;
    if offsets.len() != n {
        return Err(RestError::Body {
            url: url.to_string(),
            reason: format!("{} offsets for {n} records", offsets.len()),
        });
    }
    Ok(offsets
        .iter()
        .map(|o| match o.get("error_code").and_then(Value::as_i64) {
            None | Some(0) => RecordOutcome::Ok {
                partition: o["partition"].as_i64().unwrap_or(-1) as i32,
                offset: o["offset"].as_i64().unwrap_or(-1),
            },
            Some(code) => RecordOutcome::Failed {
                code,
                message: o["error"].as_str().unwrap_or_default().to_string(),
            },
        })
        .collect())
}

fn truncate(s: &str) -> String {
    let s = s.trim();
    if s.len() > 200 {
        format!("{}…", &s[..s.floor_char_boundary(200)])
    } else {
        s.to_string()
    }
}

/// A reqwest error on `url` as a [`RestError::Transport`].
fn transport(url: &str) -> impl Fn(reqwest::Error) -> RestError + '_ {
    move |e| RestError::Transport {
        url: redact_url(url),
        reason: redact_text(&transport_reason(&e)),
    }
}

fn transport_reason(e: &reqwest::Error) -> String {
    let mut reason = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        reason.push_str(&format!(": {s}"));
        source = s.source();
    }
    if e.is_timeout() {
        reason.push_str(" (timed out)");
    }
    reason
}

impl RestProxy {
    /// Register `schema` under `subject` in a Schema Registry (same credentials and trust as the
    /// proxy); the schema id.
    pub async fn register_schema(
        &self,
        registry_url: &str,
        subject: &str,
        schema: &str,
        schema_type: Option<&str>,
    ) -> Result<i64, RestError> {
        self.post_schema(
            registry_url,
            &format!("subjects/{subject}/versions"),
            schema,
            schema_type,
        )
        .await
    }

    /// `POST {registry}/{path}` with `schema` (and its `schemaType`, absent for Avro); the `id`
    /// of the answer.
    async fn post_schema(
        &self,
        registry_url: &str,
        path: &str,
        schema: &str,
        schema_type: Option<&str>,
    ) -> Result<i64, RestError> {
        let url = format!("{}/{path}", registry_url.trim_end_matches('/'));
        let body = match schema_type {
            Some(t) => json!({ "schema": schema, "schemaType": t }),
            None => json!({ "schema": schema }),
        };
        let r = self
            .request(reqwest::Method::POST, &url)
            .header("Content-Type", REGISTRY_JSON)
            .body(body.to_string());
        let v = self.send(&url, r).await?;
        v["id"].as_i64().ok_or_else(|| RestError::Body {
            url,
            reason: "no id in the answer".into(),
        })
    }

    /// Schema `id`'s text and `schemaType` (absent for Avro): `GET /schemas/ids/{id}`; `None`
    /// when the registry has no such schema (40403).
    pub async fn schema_by_id(
        &self,
        registry_url: &str,
        id: i64,
    ) -> Result<Option<(Option<String>, String)>, RestError> {
        let url = format!("{}/schemas/ids/{id}", registry_url.trim_end_matches('/'));
        let r = self
            .request(reqwest::Method::GET, &url)
            .header("Accept", REGISTRY_JSON);
        match self.send(&url, r).await {
            Ok(v) => match v["schema"].as_str() {
                Some(text) => Ok(Some((
                    v["schemaType"].as_str().map(String::from),
                    text.to_string(),
                ))),
                None => Err(RestError::Body {
                    url,
                    reason: "no schema in the answer".into(),
                }),
            },
            Err(e) if e.code() == Some(40403) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The id `schema` already has under `subject` (`POST /subjects/{subject}`, what Confluent's
    /// serializers ask with `auto.register.schemas=false`); 40401 or 40403 when it has none.
    pub async fn lookup_schema(
        &self,
        registry_url: &str,
        subject: &str,
        schema: &str,
        schema_type: Option<&str>,
    ) -> Result<i64, RestError> {
        self.post_schema(
            registry_url,
            &format!("subjects/{subject}"),
            schema,
            schema_type,
        )
        .await
    }
}
