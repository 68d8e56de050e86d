//! A pass-through TCP proxy in front of a broker that keeps every CreateTopics request it sees
//! (decoded by kafka-protocol, as the broker would read it), and may answer them itself with an
//! error instead of forwarding them: what a client's CreateTopics carried, on the wire, and how it
//! takes a broker refusing a topic. Only the bootstrap connection goes through it (the broker
//! advertises its own address), and that is the one kbench sends CreateTopics on.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::{
    CreateTopicsRequest, CreateTopicsResponse, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};

const CREATE_TOPICS: i16 = 19;

pub struct CreateTopicsTap {
    /// Where clients connect.
    pub addr: String,
    /// Every CreateTopics request seen, in order.
    pub seen: Arc<Mutex<Vec<CreateTopicsRequest>>>,
}

/// A tap in front of `upstream`; with `refuse` (an error code and message), every CreateTopics is
/// answered with that error for each of its topics instead of reaching the broker.
pub fn tap_create_topics(upstream: &str, refuse: Option<(i16, &'static str)>) -> CreateTopicsTap {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the tap");
    let addr = listener.local_addr().unwrap().to_string();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (upstream, kept) = (upstream.to_string(), seen.clone());
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { return };
            let Ok(server) = TcpStream::connect(&upstream) else {
                return;
            };
            let to_client = Arc::new(Mutex::new(client.try_clone().unwrap()));
            let (mut from_server, back) = (server.try_clone().unwrap(), to_client.clone());
            // Answers go back whole frames at a time, so that one the tap writes never splits one.
            std::thread::spawn(move || {
                while let Some(frame) = read_frame(&mut from_server) {
                    if back.lock().unwrap().write_all(&frame).is_err() {
                        return;
                    }
                }
            });
            let kept = kept.clone();
            std::thread::spawn(move || forward(client, server, to_client, kept, refuse));
        }
    });
    CreateTopicsTap { addr, seen }
}

fn forward(
    mut client: TcpStream,
    mut server: TcpStream,
    to_client: Arc<Mutex<TcpStream>>,
    seen: Arc<Mutex<Vec<CreateTopicsRequest>>>,
    refuse: Option<(i16, &'static str)>,
) {
    while let Some(frame) = read_frame(&mut client) {
        let body = &frame[4..];
        let api = i16::from_be_bytes([body[0], body[1]]);
        let version = i16::from_be_bytes([body[2], body[3]]);
        if api == CREATE_TOPICS {
            let mut buf = Bytes::copy_from_slice(body);
            let header =
                RequestHeader::decode(&mut buf, CreateTopicsRequest::header_version(version))
                    .expect("CreateTopics header");
            let request = CreateTopicsRequest::decode(&mut buf, version).expect("CreateTopics");
            seen.lock().unwrap().push(request.clone());
            if let Some((code, message)) = refuse {
                let answer = refusal(&request, header.correlation_id, version, code, message);
                if to_client.lock().unwrap().write_all(&answer).is_err() {
                    return;
                }
                continue;
            }
        }
        if server.write_all(&frame).is_err() {
            return;
        }
    }
}

/// The CreateTopics response refusing every topic of `request`, framed.
fn refusal(
    request: &CreateTopicsRequest,
    correlation_id: i32,
    version: i16,
    code: i16,
    message: &'static str,
) -> Vec<u8> {
    let response = CreateTopicsResponse::default().with_topics(
        request
            .topics
            .iter()
            .map(|t| {
                CreatableTopicResult::default()
                    .with_name(t.name.clone())
                    .with_error_code(code)
                    .with_error_message(Some(StrBytes::from_static_str(message)))
            })
            .collect(),
    );
    let mut body = BytesMut::new();
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut body, CreateTopicsResponse::header_version(version))
        .unwrap();
    response.encode(&mut body, version).unwrap();
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    frame
}

/// One size-prefixed frame, prefix included; None at the end of the stream.
fn read_frame(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).ok()?;
    let mut frame = len.to_vec();
    frame.resize(4 + i32::from_be_bytes(len) as usize, 0);
    s.read_exact(&mut frame[4..]).ok()?;
    Some(frame)
}
