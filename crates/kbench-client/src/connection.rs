//! One broker connection, pipelined: a writer task sends frames in order, a reader task matches each
//! response to the oldest outstanding request (Kafka answers in order on a connection), and a
//! semaphore caps requests in flight. On connect it asks ApiVersions and keeps the broker's ranges,
//! from which every later request's version is chosen (or checked against a pin).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kbench_wire::frame::peek_correlation_id;
use kbench_wire::versions::choose;
use kbench_wire::{
    ApiKey, ApiRanges, Pins, api_name, decode_response, decode_response_tolerant, encode_request,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};

use crate::error::ClientError;

/// Largest response frame accepted; anything larger is a corrupt stream, not a response.
const MAX_FRAME: usize = 256 * 1024 * 1024;

type Reply = oneshot::Sender<Result<Bytes, ClientError>>;

/// A connection's two directions: a TCP socket's halves, or a TLS stream's.
type ReadHalf = Box<dyn AsyncRead + Send + Unpin>;
type WriteHalf = Box<dyn AsyncWrite + Send + Unpin>;

struct Outgoing {
    correlation_id: i32,
    /// The frame, in pieces written in order with one vectored write: one piece for most requests;
    /// for Produce, the pieces around each record batch and the batches themselves, never copied.
    parts: Parts,
    on_done: OnDone,
}

/// A frame's pieces.
enum Parts {
    One(Bytes),
    Many(Vec<Bytes>),
}

/// What the writer does once a frame is out.
enum OnDone {
    /// Await the broker's response and hand it over.
    Response(Reply),
    /// The broker will not answer (Produce with acks=0): say when the frame has left for the socket.
    Written(oneshot::Sender<()>),
}

/// Requests written and not yet answered, oldest first; `closed` once the connection is gone.
#[derive(Default)]
struct Pending {
    replies: VecDeque<(i32, Reply)>,
    /// Correlation ids of recent requests sent without expecting a response (acks=0). Kafka never
    /// answers them; some Kafka-compatible brokers (Tansu 0.6) do, and such answers are discarded.
    unanswered: VecDeque<i32>,
    closed: Option<ClientError>,
}

/// How many acks=0 correlation ids are remembered for discarding a compatible broker's answers.
const UNANSWERED_MEMORY: usize = 65_536;

/// What a connection's writer did: frames written, and the writes (system calls, or TLS writes) that
/// carried them. Frames per write says how well requests were gathered. And what its reader found
/// odd: responses with bytes left after their body (read as Java's client reads them).
#[derive(Debug, Default)]
pub struct WriteStats {
    pub frames: std::sync::atomic::AtomicU64,
    pub writes: std::sync::atomic::AtomicU64,
    /// Responses with bytes after their body, by API name (a protocol anomaly, counted in results).
    anomalies: Mutex<std::collections::BTreeMap<String, u64>>,
}

impl WriteStats {
    /// (frames, writes) so far.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.frames.load(Ordering::Relaxed),
            self.writes.load(Ordering::Relaxed),
        )
    }

    /// Protocol anomalies so far: what was odd, and how often.
    pub fn anomalies(&self) -> std::collections::BTreeMap<String, u64> {
        self.anomalies.lock().expect("anomalies lock").clone()
    }

    pub(crate) fn anomaly(&self, what: String) {
        *self
            .anomalies
            .lock()
            .expect("anomalies lock")
            .entry(what)
            .or_default() += 1;
    }
}

/// A Produce request's fields around its batches ([`Connection::produce`]).
#[derive(Debug, Clone, Copy)]
pub struct ProduceCall<'a> {
    pub version: i16,
    pub acks: i16,
    pub timeout_ms: i32,
    pub topic: kbench_wire::TopicRef<'a>,
    /// A transactional producer's `transactional.id`.
    pub transactional_id: Option<&'a str>,
}

/// A live connection to one broker.
pub struct Connection {
    addr: String,
    client_id: StrBytes,
    outgoing: mpsc::Sender<Outgoing>,
    pending: Arc<Mutex<Pending>>,
    in_flight: Arc<Semaphore>,
    next_correlation_id: AtomicI32,
    broken: Arc<AtomicBool>,
    ranges: ApiRanges,
    /// Asks the writer to finish what is queued and half-close the socket.
    closing: tokio_util::sync::CancellationToken,
    reader: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// The ApiVersions version the broker answered.
    api_versions_version: i16,
    request_timeout: Duration,
    /// SASL, kept for re-authentication (KIP-368).
    sasl: Option<crate::Sasl>,
    /// When to re-authenticate: a point between 85 % and 95 % of the session lifetime, as Java's
    /// client picks it.
    reauth_at: Mutex<Option<std::time::Instant>>,
    /// Held by the one task re-authenticating.
    reauth_lock: tokio::sync::Mutex<()>,
    max_in_flight: u32,
    /// The cluster's counts this connection adds to (writes, anomalies).
    stats: Arc<WriteStats>,
}

/// What a connection is opened with besides its address: the client id it gives, how long it waits
/// to connect and for each answer, how many requests it keeps in flight, and its security.
pub(crate) struct ConnectOptions<'a> {
    pub(crate) client_id: &'a str,
    pub(crate) connect_timeout: Duration,
    pub(crate) request_timeout: Duration,
    pub(crate) max_in_flight: usize,
    pub(crate) tls: Option<&'a crate::Tls>,
    pub(crate) sasl: Option<&'a crate::Sasl>,
}

impl<'a> ConnectOptions<'a> {
    /// A cluster's connections' settings, as its configuration gives them.
    pub(crate) fn of(config: &'a crate::ClusterConfig) -> ConnectOptions<'a> {
        ConnectOptions {
            client_id: &config.client_id,
            connect_timeout: config.connect_timeout,
            request_timeout: config.request_timeout,
            max_in_flight: config.max_in_flight,
            tls: config.tls.as_deref(),
            sasl: config.sasl.as_deref(),
        }
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("addr", &self.addr)
            .finish()
    }
}

impl Connection {
    /// Connect, start the reader and writer tasks, and learn the broker's API version ranges.
    pub async fn connect(
        addr: &str,
        client_id: &str,
        connect_timeout: Duration,
        request_timeout: Duration,
        max_in_flight: usize,
        tls: Option<&crate::Tls>,
        sasl: Option<&crate::Sasl>,
    ) -> Result<Connection, ClientError> {
        let settings = ConnectOptions {
            client_id,
            connect_timeout,
            request_timeout,
            max_in_flight,
            tls,
            sasl,
        };
        Self::connect_counted(addr, settings, Arc::new(WriteStats::default())).await
    }

    /// As [`connect`](Self::connect), the writer counting into `write_stats` (a cluster's total).
    pub(crate) async fn connect_counted(
        addr: &str,
        settings: ConnectOptions<'_>,
        write_stats: Arc<WriteStats>,
    ) -> Result<Connection, ClientError> {
        let ConnectOptions {
            client_id,
            connect_timeout,
            request_timeout,
            max_in_flight,
            tls,
            sasl,
        } = settings;
        let connect_err = |reason: String| ClientError::Connect {
            addr: addr.to_string(),
            reason,
        };
        // The whole setup (TCP, TLS, ApiVersions, SASL) within socket.connection.setup.timeout.ms,
        // as librdkafka bounds it: a broker that takes the connection and never answers is given
        // up on within the setting, and the bootstrap list's next address is tried.
        let started = std::time::Instant::now();
        let setup_left = || connect_timeout.saturating_sub(started.elapsed());
        let no_answer = |to: &str| {
            connect_err(format!(
                "no answer{to} within {} ms (socket.connection.setup.timeout.ms)",
                connect_timeout.as_millis()
            ))
        };
        let stream = tokio::time::timeout(connect_timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| no_answer(""))?
            .map_err(|e| connect_err(e.to_string()))?;
        stream
            .set_nodelay(true)
            .map_err(|e| connect_err(e.to_string()))?;
        let (read, write): (ReadHalf, WriteHalf) = match tls {
            None => {
                let (r, w) = stream.into_split();
                (Box::new(r), Box::new(w))
            }
            Some(tls) => {
                let stream = tokio::time::timeout(setup_left(), tls.connect(addr, stream))
                    .await
                    .map_err(|_| {
                        connect_err(format!(
                            "TLS handshake not done within {} ms (socket.connection.setup.timeout.ms; is this a TLS port?)",
                            connect_timeout.as_millis()
                        ))
                    })?
                    .map_err(connect_err)?;
                let (r, w) = tokio::io::split(stream);
                (Box::new(r), Box::new(w))
            }
        };
        let pending = Arc::new(Mutex::new(Pending::default()));
        let broken = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel(max_in_flight.max(1) * 2);
        let closing = tokio_util::sync::CancellationToken::new();
        tokio::spawn(write_loop(
            addr.to_string(),
            write,
            rx,
            closing.clone(),
            pending.clone(),
            broken.clone(),
            write_stats.clone(),
        ));
        let reader = tokio::spawn(read_loop(
            addr.to_string(),
            read,
            pending.clone(),
            broken.clone(),
        ));
        let mut conn = Connection {
            addr: addr.to_string(),
            client_id: StrBytes::from_string(client_id.to_string()),
            outgoing: tx,
            pending,
            in_flight: Arc::new(Semaphore::new(max_in_flight.max(1))),
            next_correlation_id: AtomicI32::new(0),
            broken,
            ranges: ApiRanges::default(),
            closing,
            reader: Mutex::new(Some(reader)),
            api_versions_version: 3,
            request_timeout,
            sasl: sasl.cloned(),
            reauth_at: Mutex::new(None),
            reauth_lock: tokio::sync::Mutex::new(()),
            max_in_flight: max_in_flight.max(1) as u32,
            stats: write_stats,
        };
        let versions = match tokio::time::timeout(setup_left(), conn.api_versions()).await {
            Ok(versions) => versions,
            Err(_) => {
                conn.close(Duration::ZERO).await;
                return Err(no_answer(" to ApiVersions"));
            }
        };
        (conn.api_versions_version, conn.ranges) = versions.map_err(|e| match e {
            ClientError::Disconnected { reason, .. } => connect_err(format!(
                "closed during ApiVersions ({reason}); is this a Kafka broker?"
            )),
            other => other,
        })?;
        if let Some(sasl) = sasl {
            let lifetime =
                match tokio::time::timeout(setup_left(), crate::sasl::authenticate(&conn, sasl))
                    .await
                {
                    Ok(lifetime) => lifetime?,
                    Err(_) => {
                        conn.close(Duration::ZERO).await;
                        return Err(no_answer(" to the SASL handshake"));
                    }
                };
            conn.schedule_reauthentication(lifetime);
        }
        Ok(conn)
    }

    /// Re-authenticate within `lifetime` (the broker's `session_lifetime_ms`), if it set one.
    fn schedule_reauthentication(&self, lifetime: Option<Duration>) {
        let at = lifetime.map(|lifetime| {
            use ring::rand::SecureRandom;
            let mut b = [0u8; 2];
            let _ = ring::rand::SystemRandom::new().fill(&mut b);
            let share = 0.85 + 0.10 * f64::from(u16::from_le_bytes(b)) / f64::from(u16::MAX);
            std::time::Instant::now() + lifetime.mul_f64(share)
        });
        *self.reauth_at.lock().expect("reauth lock") = at;
    }

    fn reauthentication_due(&self) -> bool {
        self.reauth_at
            .lock()
            .expect("reauth lock")
            .is_some_and(|at| std::time::Instant::now() >= at)
    }

    /// Re-authenticate (KIP-368) before the session lifetime ends: wait until nothing is in flight,
    /// hold every request back, and run the SASL exchange again on this connection. A broker that
    /// refuses (some Kafka-compatible brokers cannot re-authenticate) loses the connection: it is
    /// marked broken, so that it is replaced by a freshly authenticated one, and the request that
    /// found it due fails retriably.
    async fn reauthenticate(&self) -> Result<(), ClientError> {
        let _one = self.reauth_lock.lock().await;
        if !self.reauthentication_due() {
            return Ok(());
        }
        let Some(sasl) = &self.sasl else {
            return Ok(());
        };
        let _all = self
            .in_flight
            .clone()
            .acquire_many_owned(self.max_in_flight)
            .await
            .map_err(|_| self.disconnected("connection closed"))?;
        match crate::sasl::authenticate(self, sasl).await {
            Ok(lifetime) => {
                tracing::debug!(addr = %self.addr, "SASL re-authenticated (KIP-368)");
                self.schedule_reauthentication(lifetime);
                Ok(())
            }
            Err(e) => {
                tracing::warn!(
                    "{}: SASL re-authentication (KIP-368) failed, replacing the connection: {e}",
                    self.addr
                );
                *self.reauth_at.lock().expect("reauth lock") = None;
                self.broken.store(true, Ordering::Relaxed);
                self.closing.cancel();
                Err(self.disconnected("SASL re-authentication failed"))
            }
        }
    }

    /// ApiVersions v3, falling back to the highest version the broker names if it rejects v3.
    async fn api_versions(&self) -> Result<(i16, ApiRanges), ClientError> {
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("kbench"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let mut version = 3;
        loop {
            let (correlation_id, frame) = self
                .request_frame(ApiKey::ApiVersions, version, &request)
                .await?;
            // A broker that does not know this ApiVersions version answers in v0 (UNSUPPORTED_VERSION
            // and its own ranges, KIP-511), as Kafka before 2.4 does: read it as v0 when it does not
            // decode at the version asked. One whose answer decodes neither way but starts with
            // UNSUPPORTED_VERSION (librdkafka's mock cluster writes a v3 error half flexible) is
            // asked again a version lower.
            let response: ApiVersionsResponse = match decode_response(
                ApiKey::ApiVersions,
                version,
                correlation_id,
                frame.clone(),
            ) {
                Ok(r) => r,
                Err(e) if version > 0 => {
                    match decode_response(ApiKey::ApiVersions, 0, correlation_id, frame.clone()) {
                        Ok(r) => r,
                        // The body's first field, after the 4-byte correlation id.
                        Err(_) if frame.get(4..6) == Some(&35i16.to_be_bytes()[..]) => {
                            version -= 1;
                            continue;
                        }
                        Err(_) => return Err(e.into()),
                    }
                }
                Err(e) => return Err(e.into()),
            };
            let ranges = ApiRanges::from_response(&response);
            match response.error_code {
                0 => return Ok((version, ranges)),
                35 if version > 0 => {
                    // UNSUPPORTED_VERSION: retry at the broker's own highest ApiVersions version.
                    let max = ranges.get(ApiKey::ApiVersions).map_or(0, |r| r.max);
                    if max >= version {
                        return Err(ClientError::kafka("ApiVersions", &self.addr, 35));
                    }
                    version = max;
                }
                code => return Err(ClientError::kafka("ApiVersions", &self.addr, code)),
            }
        }
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The broker's announced version ranges.
    pub fn ranges(&self) -> &ApiRanges {
        &self.ranges
    }

    /// The ApiVersions version this connection used.
    pub fn api_versions_version(&self) -> i16 {
        self.api_versions_version
    }

    /// Close gracefully: write what is queued, half-close, and read until the broker closes its side
    /// (or `patience` runs out), so that no request still in the broker's socket buffer is lost to a
    /// reset. Requests sent without a response (acks=0) need this to arrive.
    pub async fn close(&self, patience: Duration) {
        self.closing.cancel();
        let reader = self.reader.lock().expect("reader lock").take();
        if let Some(mut reader) = reader
            && tokio::time::timeout(patience, &mut reader).await.is_err()
        {
            reader.abort();
        }
    }

    /// Whether the connection has failed; a broken connection is replaced, never reused.
    pub fn is_broken(&self) -> bool {
        self.broken.load(Ordering::Relaxed)
    }

    /// The version to use for `api` on this connection: the pin, or the highest common version.
    pub fn version(&self, api: ApiKey, pins: &Pins) -> Result<i16, ClientError> {
        Ok(choose(api, &self.ranges, pins)?)
    }

    /// Send a request at `version` and wait for its response.
    pub async fn request_at<Req: Encodable, Resp: Decodable>(
        &self,
        api: ApiKey,
        version: i16,
        body: &Req,
    ) -> Result<Resp, ClientError> {
        let permit = self.acquire().await?;
        let (correlation_id, reply) = self.send(api, version, body).await?;
        let frame = self.wait(api, reply.expect("reply requested")).await;
        drop(permit);
        self.decode(api, version, correlation_id, frame?)
    }

    /// Decode a response, tolerating bytes after its body as Java's client does (librdkafka's mock
    /// cluster sends one after flexible Metadata answers); each such response is counted as a
    /// protocol anomaly.
    fn decode<Resp: Decodable>(
        &self,
        api: ApiKey,
        version: i16,
        correlation_id: i32,
        frame: Bytes,
    ) -> Result<Resp, ClientError> {
        let (body, left) = decode_response_tolerant(api, version, correlation_id, frame)?;
        if left > 0 {
            tracing::debug!(addr = %self.addr, api = %api_name(api), version, left, "bytes after a response body");
            self.stats.anomaly(format!(
                "{} v{version} response with bytes after its body",
                api_name(api)
            ));
        }
        Ok(body)
    }

    /// As [`request_at`](Self::request_at), waiting up to `timeout` instead of the connection's
    /// request timeout: for a request the broker may hold by design (JoinGroup waits up to the
    /// rebalance timeout; Java's client allows it that plus 5 s).
    pub async fn request_within<Req: Encodable, Resp: Decodable>(
        &self,
        api: ApiKey,
        version: i16,
        body: &Req,
        timeout: Duration,
    ) -> Result<Resp, ClientError> {
        let permit = self.acquire().await?;
        let (correlation_id, reply) = self.send(api, version, body).await?;
        let frame = self
            .wait_for(api, reply.expect("reply requested"), timeout)
            .await;
        drop(permit);
        self.decode(api, version, correlation_id, frame?)
    }

    /// Send a request at `version` and wait for its response, past the in-flight limit and without
    /// checking for re-authentication: for the SASL exchange itself, run while every other request is
    /// held back.
    pub(crate) async fn request_direct<Req: Encodable, Resp: Decodable>(
        &self,
        api: ApiKey,
        version: i16,
        body: &Req,
    ) -> Result<Resp, ClientError> {
        let (correlation_id, reply) = self.send(api, version, body).await?;
        let frame = self.wait(api, reply.expect("reply requested")).await;
        self.decode(api, version, correlation_id, frame?)
    }

    /// Send a request at `version` and return the response frame undecoded (header included), with
    /// the correlation id to check it against.
    pub async fn request_frame<Req: Encodable>(
        &self,
        api: ApiKey,
        version: i16,
        body: &Req,
    ) -> Result<(i32, Bytes), ClientError> {
        let permit = self.acquire().await?;
        let (correlation_id, reply) = self.send(api, version, body).await?;
        let frame = self.wait(api, reply.expect("reply requested")).await;
        drop(permit);
        Ok((correlation_id, frame?))
    }

    async fn acquire(&self) -> Result<OwnedSemaphorePermit, ClientError> {
        if self.reauthentication_due() {
            self.reauthenticate().await?;
        }
        self.in_flight
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| self.disconnected("connection closed"))
    }

    /// Send a request whose response is awaited.
    async fn send<Req: Encodable>(
        &self,
        api: ApiKey,
        version: i16,
        body: &Req,
    ) -> Result<(i32, Option<oneshot::Receiver<Result<Bytes, ClientError>>>), ClientError> {
        self.send_with(
            |frame, correlation_id| {
                encode_request(frame, api, version, correlation_id, &self.client_id, body)?;
                Ok(None)
            },
            true,
        )
        .await
    }

    /// Send a frame `encode` writes for a correlation id; if it returns pieces, they are the frame
    /// (sent in order, uncopied), else what it wrote is.
    async fn send_with(
        &self,
        encode: impl FnOnce(&mut BytesMut, i32) -> Result<Option<Vec<Bytes>>, ClientError>,
        answered: bool,
    ) -> Result<(i32, Option<oneshot::Receiver<Result<Bytes, ClientError>>>), ClientError> {
        if let Some(err) = self.pending.lock().expect("pending lock").closed.clone() {
            return Err(err);
        }
        let correlation_id = self.next_correlation_id.fetch_add(1, Ordering::Relaxed);
        let mut frame = BytesMut::new();
        let parts = match encode(&mut frame, correlation_id)? {
            Some(pieces) => Parts::Many(pieces),
            None => Parts::One(frame.freeze()),
        };
        let (on_done, response, written) = if answered {
            let (tx, rx) = oneshot::channel();
            (OnDone::Response(tx), Some(rx), None)
        } else {
            let (tx, rx) = oneshot::channel();
            (OnDone::Written(tx), None, Some(rx))
        };
        self.outgoing
            .send(Outgoing {
                correlation_id,
                parts,
                on_done,
            })
            .await
            .map_err(|_| self.disconnected("connection closed"))?;
        if let Some(written) = written {
            written.await.map_err(|_| {
                self.disconnected("connection closed before the request was written")
            })?;
        }
        Ok((correlation_id, response))
    }

    /// Produce record batches, one per partition of `call.topic`, at `call.version` in one request; the
    /// batches are sent as they are (never copied into the frame). With `acks=0` (`answered` false)
    /// the broker does not answer; `None` then.
    pub async fn produce(
        &self,
        call: ProduceCall<'_>,
        batches: &[(i32, Bytes)],
        answered: bool,
    ) -> Result<Option<kafka_protocol::messages::ProduceResponse>, ClientError> {
        let ProduceCall {
            version,
            acks,
            timeout_ms,
            topic,
            transactional_id,
        } = call;
        let permit = self.acquire().await?;
        let client_id = self.client_id.as_str();
        let (correlation_id, reply) = self
            .send_with(
                |frame, correlation_id| {
                    let head = kbench_wire::ProduceHead {
                        version,
                        correlation_id,
                        client_id,
                        acks,
                        timeout_ms,
                        topic,
                        transactional_id,
                    };
                    let shape: Vec<(i32, usize)> =
                        batches.iter().map(|(p, b)| (*p, b.len())).collect();
                    let cuts = kbench_wire::encode_produce_frame(frame, &head, &shape)
                        .map_err(|e| ClientError::Frame(e.to_string()))?;
                    let pieces = std::mem::take(frame).freeze();
                    let mut parts = Vec::with_capacity(2 * batches.len() + 1);
                    let mut from = 0;
                    for (cut, (_, batch)) in cuts.iter().zip(batches) {
                        parts.push(pieces.slice(from..*cut));
                        parts.push(batch.clone());
                        from = *cut;
                    }
                    if from < pieces.len() {
                        parts.push(pieces.slice(from..));
                    }
                    Ok(Some(parts))
                },
                answered,
            )
            .await?;
        let Some(reply) = reply else {
            drop(permit);
            return Ok(None);
        };
        let frame = self.wait(ApiKey::Produce, reply).await;
        drop(permit);
        Ok(Some(self.decode(
            ApiKey::Produce,
            version,
            correlation_id,
            frame?,
        )?))
    }

    async fn wait(
        &self,
        api: ApiKey,
        reply: oneshot::Receiver<Result<Bytes, ClientError>>,
    ) -> Result<Bytes, ClientError> {
        self.wait_for(api, reply, self.request_timeout).await
    }

    async fn wait_for(
        &self,
        api: ApiKey,
        reply: oneshot::Receiver<Result<Bytes, ClientError>>,
        timeout: Duration,
    ) -> Result<Bytes, ClientError> {
        match tokio::time::timeout(timeout, reply).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(self.disconnected("connection closed")),
            Err(_) => {
                // A response may still come for this request; the connection's order is no longer
                // trustworthy for us, so it is retired.
                self.broken.store(true, Ordering::Relaxed);
                Err(ClientError::Timeout {
                    addr: self.addr.clone(),
                    api: api_name(api),
                    timeout_ms: timeout.as_millis() as u64,
                })
            }
        }
    }

    fn disconnected(&self, reason: &str) -> ClientError {
        ClientError::Disconnected {
            addr: self.addr.clone(),
            reason: reason.to_string(),
        }
    }
}

/// Mark the connection closed and fail every outstanding request with `err`.
fn close(pending: &Mutex<Pending>, broken: &AtomicBool, err: ClientError) {
    broken.store(true, Ordering::Relaxed);
    let mut p = pending.lock().expect("pending lock");
    if p.closed.is_none() {
        p.closed = Some(err.clone());
    }
    for (_, reply) in p.replies.drain(..) {
        let _ = reply.send(Err(err.clone()));
    }
}

/// Most requests gathered into one vectored write.
const WRITE_GATHER: usize = 64;

async fn write_loop(
    addr: String,
    mut write: WriteHalf,
    mut rx: mpsc::Receiver<Outgoing>,
    closing: tokio_util::sync::CancellationToken,
    pending: Arc<Mutex<Pending>>,
    broken: Arc<AtomicBool>,
    stats: Arc<WriteStats>,
) {
    // Sockets take the pieces of every queued frame in one writev; a stream that cannot (none of
    // kbench's, but a wrapper might not say so) gets them copied into one buffer instead.
    let vectored = write.is_write_vectored();
    let mut scratch = BytesMut::new();
    let mut parts: Vec<Bytes> = Vec::new();
    let mut written = Vec::new();
    loop {
        // Queued requests first; once closing, stop when the queue is empty.
        let next = tokio::select! {
            biased;
            out = rx.recv() => out,
            _ = closing.cancelled() => None,
        };
        let Some(mut out) = next else { break };
        // Gather everything queued, then write it at once: one syscall for many requests.
        let mut gathered = 0;
        loop {
            let write_it = match out.on_done {
                OnDone::Response(reply) => {
                    let mut p = pending.lock().expect("pending lock");
                    match p.closed.clone() {
                        Some(err) => {
                            let _ = reply.send(Err(err));
                            false
                        }
                        None => {
                            p.replies.push_back((out.correlation_id, reply));
                            true
                        }
                    }
                }
                OnDone::Written(tx) => {
                    let mut p = pending.lock().expect("pending lock");
                    if p.unanswered.len() >= UNANSWERED_MEMORY {
                        p.unanswered.pop_front();
                    }
                    p.unanswered.push_back(out.correlation_id);
                    written.push(tx);
                    true
                }
            };
            if write_it {
                match out.parts {
                    Parts::One(b) => parts.push(b),
                    Parts::Many(v) => parts.extend(v),
                }
                gathered += 1;
            }
            if gathered >= WRITE_GATHER {
                break;
            }
            match rx.try_recv() {
                Ok(more) => out = more,
                Err(_) => break,
            }
        }
        stats.frames.fetch_add(gathered as u64, Ordering::Relaxed);
        let result = if vectored {
            write_vectored_all(&mut write, &parts, &stats).await
        } else {
            stats.writes.fetch_add(1, Ordering::Relaxed);
            scratch.clear();
            for p in &parts {
                scratch.extend_from_slice(p);
            }
            write.write_all(&scratch).await
        };
        parts.clear();
        if let Err(e) = match result {
            Ok(()) => write.flush().await,
            Err(e) => Err(e),
        } {
            close(&pending, &broken, lost(&addr, e));
            return;
        }
        for tx in written.drain(..) {
            let _ = tx.send(());
        }
    }
    let _ = write.shutdown().await;
}

/// Write every piece, in order, with as few vectored writes as the socket allows.
async fn write_vectored_all(
    write: &mut WriteHalf,
    parts: &[Bytes],
    stats: &WriteStats,
) -> std::io::Result<()> {
    let mut slices: Vec<std::io::IoSlice<'_>> = parts
        .iter()
        .filter(|p| !p.is_empty())
        .map(|p| std::io::IoSlice::new(p))
        .collect();
    let mut bufs = &mut slices[..];
    while !bufs.is_empty() {
        let n = write.write_vectored(bufs).await?;
        stats.writes.fetch_add(1, Ordering::Relaxed);
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        std::io::IoSlice::advance_slices(&mut bufs, n);
    }
    Ok(())
}

async fn read_loop(
    addr: String,
    mut read: ReadHalf,
    pending: Arc<Mutex<Pending>>,
    broken: Arc<AtomicBool>,
) {
    // One read takes as many bytes as the socket has; every complete frame in them is dispatched.
    const READ_CHUNK: usize = 64 * 1024;
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    loop {
        loop {
            let frame = match kbench_wire::frame::next_frame(&mut buf, MAX_FRAME) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(reason) => {
                    close(
                        &pending,
                        &broken,
                        ClientError::Disconnected { addr, reason },
                    );
                    return;
                }
            };
            let correlation_id = peek_correlation_id(&frame).unwrap_or(-1);
            let mut p = pending.lock().expect("pending lock");
            if p.replies
                .front()
                .is_some_and(|(id, _)| *id == correlation_id)
            {
                let (_, reply) = p.replies.pop_front().expect("front exists");
                drop(p);
                let _ = reply.send(Ok(frame));
                continue;
            }
            // Not the oldest answered request: perhaps an answer to an acks=0 request.
            while p.unanswered.front().is_some_and(|id| *id < correlation_id) {
                p.unanswered.pop_front();
            }
            if p.unanswered.front() == Some(&correlation_id) {
                p.unanswered.pop_front();
                continue;
            }
            drop(p);
            let reason =
                format!("a response with correlation id {correlation_id} matches no request");
            close(
                &pending,
                &broken,
                ClientError::Disconnected { addr, reason },
            );
            return;
        }
        if buf.capacity() - buf.len() < READ_CHUNK / 4 {
            buf.reserve(READ_CHUNK);
        }
        match read.read_buf(&mut buf).await {
            Ok(0) => {
                let e = std::io::Error::from(std::io::ErrorKind::UnexpectedEof);
                close(&pending, &broken, lost(&addr, e));
                return;
            }
            Ok(_) => {}
            Err(e) => {
                close(&pending, &broken, lost(&addr, e));
                return;
            }
        }
    }
}

fn lost(addr: &str, e: std::io::Error) -> ClientError {
    let reason = if e.kind() == std::io::ErrorKind::UnexpectedEof {
        "the broker closed the connection".to_string()
    } else {
        e.to_string()
    };
    ClientError::Disconnected {
        addr: addr.to_string(),
        reason,
    }
}
