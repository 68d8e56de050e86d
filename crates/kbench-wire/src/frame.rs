//! Request and response framing: the 4-byte size prefix, the request header (v1, or v2 on flexible
//! versions) and the response header (always v0 for ApiVersions, whatever the version).

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// A frame that could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("could not encode {api} v{version} request: {reason}")]
    Encode {
        api: String,
        version: i16,
        reason: String,
    },
    #[error("could not decode {api} v{version} response: {reason}")]
    Decode {
        api: String,
        version: i16,
        reason: String,
    },
    #[error("response correlation id {got} does not match request {expected}")]
    Correlation { expected: i32, got: i32 },
}

/// Append one complete request frame (size, header, body) to `out`.
pub fn encode_request<R: Encodable>(
    out: &mut BytesMut,
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    client_id: &StrBytes,
    body: &R,
) -> Result<(), FrameError> {
    let fail = |reason: String| FrameError::Encode {
        api: crate::api_name(api),
        version,
        reason,
    };
    let header = RequestHeader::default()
        .with_request_api_key(api as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(client_id.clone()));
    let header_version = api.request_header_version(version);
    let size = header
        .compute_size(header_version)
        .and_then(|h| body.compute_size(version).map(|b| h + b))
        .map_err(|e| fail(e.to_string()))?;
    let Ok(length) = i32::try_from(size) else {
        return Err(fail(format!(
            "a {size}-byte request is larger than Kafka's 2 GiB frame limit"
        )));
    };
    out.reserve(4 + size);
    out.put_i32(length);
    let start = out.len();
    header
        .encode(out, header_version)
        .map_err(|e| fail(e.to_string()))?;
    body.encode(out, version).map_err(|e| fail(e.to_string()))?;
    debug_assert_eq!(out.len() - start, size);
    Ok(())
}

/// The response header version: v0 for ApiVersions always (so that a client can read an error from a
/// broker that does not understand the request version), otherwise per the API's schema.
pub fn response_header_version(api: ApiKey, version: i16) -> i16 {
    if api == ApiKey::ApiVersions {
        0
    } else {
        api.response_header_version(version)
    }
}

/// Read the correlation id at the front of a response frame (size prefix already removed).
pub fn peek_correlation_id(frame: &[u8]) -> Option<i32> {
    frame
        .get(..4)
        .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// The next complete size-prefixed frame at the front of `buf` (its body, the prefix dropped);
/// `None` until all of it has arrived (room for it is reserved); an error for a size below 4 (a
/// correlation id) or above `max`, which no amount of reading would mend.
pub fn next_frame(buf: &mut bytes::BytesMut, max: usize) -> Result<Option<Bytes>, String> {
    let Some(prefix) = buf.get(..4) else {
        return Ok(None);
    };
    let size = i32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
    if size < 4 || size as usize > max {
        return Err(format!("invalid response frame size {size}"));
    }
    let size = size as usize;
    if buf.len() < 4 + size {
        buf.reserve(4 + size - buf.len());
        return Ok(None);
    }
    buf.advance(4);
    Ok(Some(buf.split_to(size).freeze()))
}

/// Decode a response frame body (size prefix already removed), checking the correlation id.
pub fn decode_response<R: Decodable>(
    api: ApiKey,
    version: i16,
    expected_correlation_id: i32,
    frame: Bytes,
) -> Result<R, FrameError> {
    decode_response_with(api, version, expected_correlation_id, frame, |body| {
        R::decode(body, version).map_err(|e| e.to_string())
    })
}

/// As [`decode_response`], but bytes left after the body are not an error: the body and how many
/// bytes were left. Java's and librdkafka's readers ignore such bytes (librdkafka's mock cluster
/// sends one after its flexible Metadata answers); the caller counts them as a protocol anomaly.
pub fn decode_response_tolerant<R: Decodable>(
    api: ApiKey,
    version: i16,
    expected_correlation_id: i32,
    frame: Bytes,
) -> Result<(R, usize), FrameError> {
    let mut left = 0;
    let body = decode_response_with(api, version, expected_correlation_id, frame, |body| {
        let r = R::decode(body, version).map_err(|e| e.to_string())?;
        left = body.remaining();
        body.advance(left);
        Ok(r)
    })?;
    Ok((body, left))
}

/// As [`decode_response`], with the body decoded by `decode_body` (which must consume it all).
pub fn decode_response_with<R>(
    api: ApiKey,
    version: i16,
    expected_correlation_id: i32,
    mut frame: Bytes,
    decode_body: impl FnOnce(&mut Bytes) -> Result<R, String>,
) -> Result<R, FrameError> {
    let fail = |reason: String| FrameError::Decode {
        api: crate::api_name(api),
        version,
        reason,
    };
    let header = ResponseHeader::decode(&mut frame, response_header_version(api, version))
        .map_err(|e| fail(e.to_string()))?;
    if header.correlation_id != expected_correlation_id {
        return Err(FrameError::Correlation {
            expected: expected_correlation_id,
            got: header.correlation_id,
        });
    }
    let body = decode_body(&mut frame).map_err(fail)?;
    if frame.has_remaining() {
        return Err(fail(format!(
            "{} bytes left over after the body",
            frame.remaining()
        )));
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_after_a_body_are_counted_not_refused_by_the_tolerant_reader() {
        use kafka_protocol::messages::MetadataResponse;
        let mut frame = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(7)
            .encode(&mut frame, 1)
            .unwrap();
        MetadataResponse::default().encode(&mut frame, 12).unwrap();
        frame.put_u8(0);
        let frame = frame.freeze();
        assert!(
            decode_response::<MetadataResponse>(ApiKey::Metadata, 12, 7, frame.clone()).is_err()
        );
        let (_, left) =
            decode_response_tolerant::<MetadataResponse>(ApiKey::Metadata, 12, 7, frame).unwrap();
        assert_eq!(left, 1);
    }
    use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse, MetadataRequest};

    #[test]
    fn request_frame_has_size_prefix_and_header() {
        let mut out = BytesMut::new();
        let client = StrBytes::from_static_str("kbench");
        encode_request(
            &mut out,
            ApiKey::Metadata,
            12,
            42,
            &client,
            &MetadataRequest::default(),
        )
        .unwrap();
        let size = i32::from_be_bytes(out[..4].try_into().unwrap()) as usize;
        assert_eq!(size, out.len() - 4);
        let mut body = out.split_off(4).freeze();
        let header = RequestHeader::decode(&mut body, 2).unwrap();
        assert_eq!(header.request_api_key, ApiKey::Metadata as i16);
        assert_eq!(header.request_api_version, 12);
        assert_eq!(header.correlation_id, 42);
        assert_eq!(
            MetadataRequest::decode(&mut body, 12).unwrap(),
            MetadataRequest::default()
        );
    }

    #[test]
    fn api_versions_response_header_is_v0_even_when_flexible() {
        let mut frame = BytesMut::new();
        frame.put_i32(7); // correlation id, header v0 has nothing else
        ApiVersionsResponse::default()
            .encode(&mut frame, 3)
            .unwrap();
        let response: ApiVersionsResponse =
            decode_response(ApiKey::ApiVersions, 3, 7, frame.freeze()).unwrap();
        assert_eq!(response.error_code, 0);
        let _ = ApiVersionsRequest::default();
    }

    #[test]
    fn wrong_correlation_id_is_an_error() {
        let mut frame = BytesMut::new();
        frame.put_i32(8);
        ApiVersionsResponse::default()
            .encode(&mut frame, 0)
            .unwrap();
        let err = decode_response::<ApiVersionsResponse>(ApiKey::ApiVersions, 0, 7, frame.freeze());
        assert!(matches!(
            err,
            Err(FrameError::Correlation {
                expected: 7,
                got: 8
            })
        ));
    }
}
