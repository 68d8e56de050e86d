//! One broker connection, pipelined: a writer task sends frames in order, a reader task matches each
//! response to the oldest outstanding request (Kafka answers in order on a connection), and a
//! semaphore caps requests in flight. On connect it asks ApiVersions and keeps the broker's ranges,
//! from which every later request's version is chosen (or checked against a pin).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kbench_wire::versions::choose;
use kbench_wire::{ApiKey, ApiRanges, Pins, api_name, decode_response, encode_request};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};

use crate::error::ClientError;

/// Largest response frame accepted; anything larger is a corrupt stream, not a response.
const MAX_FRAME: usize = 256 * 1024 * 1024;

type Reply = oneshot::Sender<Result<Bytes, ClientError>>;

struct Outgoing {
    frame: Bytes,
    /// `None` for requests the broker does not answer (Produce with acks=0).
    reply: Option<Reply>,
}

/// Requests written and not yet answered, oldest first; `closed` once the connection is gone.
#[derive(Default)]
struct Pending {
    replies: VecDeque<Reply>,
    closed: Option<ClientError>,
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
    /// The ApiVersions version the broker answered.
    api_versions_version: i16,
    request_timeout: Duration,
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
    ) -> Result<Connection, ClientError> {
        let connect_err = |reason: String| ClientError::Connect {
            addr: addr.to_string(),
            reason,
        };
        let stream = tokio::time::timeout(connect_timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| {
                connect_err(format!(
                    "no answer within {} ms",
                    connect_timeout.as_millis()
                ))
            })?
            .map_err(|e| connect_err(e.to_string()))?;
        stream
            .set_nodelay(true)
            .map_err(|e| connect_err(e.to_string()))?;
        let (read, write) = stream.into_split();
        let pending = Arc::new(Mutex::new(Pending::default()));
        let broken = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel(max_in_flight.max(1) * 2);
        tokio::spawn(write_loop(
            addr.to_string(),
            write,
            rx,
            pending.clone(),
            broken.clone(),
        ));
        tokio::spawn(read_loop(
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
            api_versions_version: 3,
            request_timeout,
        };
        (conn.api_versions_version, conn.ranges) =
            conn.api_versions().await.map_err(|e| match e {
                ClientError::Disconnected { reason, .. } => connect_err(format!(
                    "closed during ApiVersions ({reason}); is this a Kafka broker?"
                )),
                other => other,
            })?;
        Ok(conn)
    }

    /// ApiVersions v3, falling back to the highest version the broker names if it rejects v3.
    async fn api_versions(&self) -> Result<(i16, ApiRanges), ClientError> {
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("kbench"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let mut version = 3;
        loop {
            let response: ApiVersionsResponse = self
                .request_at(ApiKey::ApiVersions, version, &request)
                .await?;
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
        let (correlation_id, reply) = self.send(api, version, body, true).await?;
        let frame = self.wait(api, reply.expect("reply requested")).await;
        drop(permit);
        Ok(decode_response(api, version, correlation_id, frame?)?)
    }

    /// Send a request the broker will not answer (Produce with acks=0). It counts as complete once it
    /// has been handed to the writer.
    pub async fn send_unanswered<Req: Encodable>(
        &self,
        api: ApiKey,
        version: i16,
        body: &Req,
    ) -> Result<(), ClientError> {
        let _permit = self.acquire().await?;
        self.send(api, version, body, false).await.map(|_| ())
    }

    async fn acquire(&self) -> Result<OwnedSemaphorePermit, ClientError> {
        self.in_flight
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| self.disconnected("connection closed"))
    }

    async fn send<Req: Encodable>(
        &self,
        api: ApiKey,
        version: i16,
        body: &Req,
        answered: bool,
    ) -> Result<(i32, Option<oneshot::Receiver<Result<Bytes, ClientError>>>), ClientError> {
        if let Some(err) = self.pending.lock().expect("pending lock").closed.clone() {
            return Err(err);
        }
        let correlation_id = self.next_correlation_id.fetch_add(1, Ordering::Relaxed);
        let mut frame = BytesMut::new();
        encode_request(
            &mut frame,
            api,
            version,
            correlation_id,
            &self.client_id,
            body,
        )?;
        let (reply, rx) = if answered {
            let (tx, rx) = oneshot::channel();
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        self.outgoing
            .send(Outgoing {
                frame: frame.freeze(),
                reply,
            })
            .await
            .map_err(|_| self.disconnected("connection closed"))?;
        Ok((correlation_id, rx))
    }

    async fn wait(
        &self,
        api: ApiKey,
        reply: oneshot::Receiver<Result<Bytes, ClientError>>,
    ) -> Result<Bytes, ClientError> {
        match tokio::time::timeout(self.request_timeout, reply).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(self.disconnected("connection closed")),
            Err(_) => {
                // A response may still come for this request; the connection's order is no longer
                // trustworthy for us, so it is retired.
                self.broken.store(true, Ordering::Relaxed);
                Err(ClientError::Timeout {
                    addr: self.addr.clone(),
                    api: api_name(api),
                    timeout_ms: self.request_timeout.as_millis() as u64,
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
    for reply in p.replies.drain(..) {
        let _ = reply.send(Err(err.clone()));
    }
}

async fn write_loop(
    addr: String,
    write: OwnedWriteHalf,
    mut rx: mpsc::Receiver<Outgoing>,
    pending: Arc<Mutex<Pending>>,
    broken: Arc<AtomicBool>,
) {
    let mut write = BufWriter::with_capacity(256 * 1024, write);
    while let Some(mut out) = rx.recv().await {
        // Write everything queued, then flush once: one syscall for many small requests.
        loop {
            let mut write_it = true;
            if let Some(reply) = out.reply {
                let mut p = pending.lock().expect("pending lock");
                match p.closed.clone() {
                    Some(err) => {
                        let _ = reply.send(Err(err));
                        write_it = false;
                    }
                    None => p.replies.push_back(reply),
                }
            }
            if write_it && let Err(e) = write.write_all(&out.frame).await {
                close(&pending, &broken, lost(&addr, e));
                return;
            }
            match rx.try_recv() {
                Ok(more) => out = more,
                Err(_) => break,
            }
        }
        if let Err(e) = write.flush().await {
            close(&pending, &broken, lost(&addr, e));
            return;
        }
    }
    let _ = write.shutdown().await;
}

async fn read_loop(
    addr: String,
    mut read: OwnedReadHalf,
    pending: Arc<Mutex<Pending>>,
    broken: Arc<AtomicBool>,
) {
    // One read takes as many bytes as the socket has; every complete frame in them is dispatched.
    const READ_CHUNK: usize = 64 * 1024;
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    loop {
        while buf.len() >= 4 {
            let size = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
            if size < 4 || size as usize > MAX_FRAME {
                let reason = format!("invalid response frame size {size}");
                close(
                    &pending,
                    &broken,
                    ClientError::Disconnected { addr, reason },
                );
                return;
            }
            let size = size as usize;
            if buf.len() < 4 + size {
                buf.reserve(4 + size - buf.len());
                break;
            }
            buf.advance(4);
            let frame = buf.split_to(size).freeze();
            let reply = pending.lock().expect("pending lock").replies.pop_front();
            match reply {
                Some(reply) => {
                    let _ = reply.send(Ok(frame));
                }
                None => {
                    let reason = "a response arrived that no request was waiting for".to_string();
                    close(
                        &pending,
                        &broken,
                        ClientError::Disconnected { addr, reason },
                    );
                    return;
                }
            }
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
