//! Record-batch compression in the formats Java brokers and librdkafka read: gzip streams, snappy in
//! the xerial framing Java clients expect, LZ4 frames with 64 KiB independent blocks, zstd frames.
//! Compression covers the records only, never the batch header.

use std::io::Write;
use std::str::FromStr;

use bytes::{BufMut, BytesMut};

/// A compression codec, with its id in the batch attributes (bits 0–2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Compression {
    None = 0,
    Gzip = 1,
    Snappy = 2,
    Lz4 = 3,
    Zstd = 4,
}

impl Compression {
    pub const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    /// The name Kafka's `compression.type` uses.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }

    /// The codec id in the low three bits of the batch attributes.
    pub fn attribute_bits(self) -> i16 {
        self as i16
    }

    /// The lowest Produce version that may carry this codec (zstd needs v7+, KIP-110).
    pub fn min_produce_version(self) -> i16 {
        if self == Compression::Zstd { 7 } else { 0 }
    }

    /// Compress `input` (the encoded records), appending the compressed form to `out`.
    pub fn compress(self, input: &[u8], out: &mut BytesMut) -> std::io::Result<()> {
        match self {
            Compression::None => out.extend_from_slice(input),
            Compression::Gzip => {
                let mut enc =
                    flate2::write::GzEncoder::new(out.writer(), flate2::Compression::fast());
                enc.write_all(input)?;
                enc.finish()?;
            }
            Compression::Snappy => xerial_snappy(input, out)?,
            Compression::Lz4 => {
                let info = lz4_flex::frame::FrameInfo::new()
                    .block_size(lz4_flex::frame::BlockSize::Max64KB)
                    .block_mode(lz4_flex::frame::BlockMode::Independent);
                let mut enc = lz4_flex::frame::FrameEncoder::with_frame_info(info, out.writer());
                enc.write_all(input)?;
                enc.finish().map_err(std::io::Error::other)?;
            }
            Compression::Zstd => {
                let mut enc = zstd::stream::write::Encoder::new(out.writer(), 3)?;
                enc.write_all(input)?;
                enc.finish()?;
            }
        }
        Ok(())
    }
}

impl FromStr for Compression {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Compression::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                format!("unknown compression {s:?} (expected one of none, gzip, snappy, lz4, zstd)")
            })
    }
}

/// The xerial snappy stream header: magic, version 1, minimum compatible version 1.
const XERIAL_HEADER: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";
/// The block size snappy-java's output stream uses.
const XERIAL_BLOCK: usize = 32 * 1024;

fn xerial_snappy(input: &[u8], out: &mut BytesMut) -> std::io::Result<()> {
    out.extend_from_slice(XERIAL_HEADER);
    let mut encoder = snap::raw::Encoder::new();
    for block in input.chunks(XERIAL_BLOCK) {
        let len_at = out.len();
        out.extend_from_slice(&[0; 4]);
        let start = out.len();
        out.resize(start + snap::raw::max_compress_len(block.len()), 0);
        let n = encoder
            .compress(block, &mut out[start..])
            .map_err(std::io::Error::other)?;
        out.truncate(start + n);
        out[len_at..len_at + 4].copy_from_slice(&(n as u32).to_be_bytes());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_is_an_error() {
        for c in Compression::ALL {
            assert_eq!(c.name().parse::<Compression>(), Ok(c));
        }
        assert!(
            "brotli"
                .parse::<Compression>()
                .unwrap_err()
                .contains("brotli")
        );
    }

    #[test]
    fn snappy_uses_xerial_framing() {
        let mut out = BytesMut::new();
        Compression::Snappy
            .compress(&[7u8; 100_000], &mut out)
            .unwrap();
        assert_eq!(&out[..16], XERIAL_HEADER);
    }
}
