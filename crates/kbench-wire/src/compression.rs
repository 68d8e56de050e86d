//! Record-batch compression in the formats Java brokers and librdkafka read: gzip streams, snappy in
//! the xerial framing Java clients expect, LZ4 frames with 64 KiB independent blocks, zstd frames.
//! Compression covers the records only, never the batch header.

use std::io::Write;
use std::str::FromStr;

use bytes::{BufMut, BytesMut};

/// A compression codec, with its id in the batch attributes (bits 0–2).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
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

    /// Compress `input` (the encoded records), appending the compressed form to `out`. A
    /// [`Compressor`] does the same with its contexts kept from call to call.
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

/// Compression with its costly state kept from batch to batch: a zstd context (creating one per
/// batch was a quarter of a zstd producer's CPU) and a deflate stream for gzip. The output is the
/// same format as [`Compression::compress`]'s.
#[derive(Default)]
pub struct Compressor {
    zstd: Option<zstd::stream::raw::Encoder<'static>>,
    deflate: Option<flate2::Compress>,
    scratch: Vec<u8>,
}

impl std::fmt::Debug for Compressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compressor").finish_non_exhaustive()
    }
}

/// The gzip member header Java's GZIPOutputStream writes: no name, no time, OS unknown.
const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];

impl Compressor {
    pub fn compress(
        &mut self,
        codec: Compression,
        input: &[u8],
        out: &mut BytesMut,
    ) -> std::io::Result<()> {
        match codec {
            Compression::Zstd => {
                // A streaming context, reset per batch, writes exactly the frame a fresh
                // `zstd::stream::write::Encoder` writes (no content size, the level's window). A
                // one-shot context (`bulk`) sizes the frame to the input, and the embedded Tansu
                // took 1.7 times the CPU to read those frames back (docs/PERFORMANCE.md).
                use zstd::stream::raw::{InBuffer, Operation, OutBuffer};
                if self.zstd.is_none() {
                    self.zstd = Some(zstd::stream::raw::Encoder::new(3)?);
                }
                let z = self.zstd.as_mut().expect("just made");
                z.reinit()?;
                self.scratch.clear();
                self.scratch
                    .reserve(zstd::zstd_safe::compress_bound(input.len()) + 64);
                let mut inb = InBuffer::around(input);
                while inb.pos() < input.len() {
                    let len = self.scratch.len();
                    if self.scratch.capacity() - len < 1024 {
                        self.scratch.reserve(64 * 1024);
                    }
                    let mut outb = OutBuffer::around_pos(&mut self.scratch, len);
                    z.run(&mut inb, &mut outb)?;
                }
                loop {
                    let len = self.scratch.len();
                    if self.scratch.capacity() - len < 1024 {
                        self.scratch.reserve(4096);
                    }
                    let mut outb = OutBuffer::around_pos(&mut self.scratch, len);
                    if z.finish(&mut outb, true)? == 0 {
                        break;
                    }
                }
                out.extend_from_slice(&self.scratch);
            }
            Compression::Gzip => {
                let deflate = self.deflate.get_or_insert_with(|| {
                    flate2::Compress::new(flate2::Compression::fast(), false)
                });
                deflate.reset();
                self.scratch.clear();
                self.scratch.reserve(input.len() + input.len() / 1000 + 64);
                loop {
                    let consumed = deflate.total_in() as usize;
                    let status = deflate
                        .compress_vec(
                            &input[consumed..],
                            &mut self.scratch,
                            flate2::FlushCompress::Finish,
                        )
                        .map_err(std::io::Error::other)?;
                    match status {
                        flate2::Status::StreamEnd => break,
                        _ => self.scratch.reserve(self.scratch.len().max(4096)),
                    }
                }
                let mut crc = flate2::Crc::new();
                crc.update(input);
                out.extend_from_slice(&GZIP_HEADER);
                out.extend_from_slice(&self.scratch);
                out.extend_from_slice(&crc.sum().to_le_bytes());
                out.extend_from_slice(&(input.len() as u32).to_le_bytes());
            }
            other => other.compress(input, out)?,
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

    /// The kept contexts write what a fresh encoder writes, batch after batch: zstd byte for byte
    /// (the same frame parameters), gzip the same deflate stream in Java's header (decoded back).
    #[test]
    fn a_kept_compressor_round_trips_batch_after_batch() {
        use std::io::Read;
        let mut c = Compressor::default();
        for n in [0usize, 1, 100, 70_000, 5] {
            let input: Vec<u8> = (0..n).map(|i| (i * 7 % 13) as u8).collect();
            for codec in Compression::ALL {
                let mut out = BytesMut::new();
                c.compress(codec, &input, &mut out).unwrap();
                let mut back = Vec::new();
                match codec {
                    Compression::Gzip => {
                        flate2::read::GzDecoder::new(&out[..])
                            .read_to_end(&mut back)
                            .unwrap();
                    }
                    Compression::Zstd => {
                        let mut fresh = BytesMut::new();
                        codec.compress(&input, &mut fresh).unwrap();
                        assert_eq!(out, fresh, "zstd, {n} bytes");
                        zstd::stream::read::Decoder::new(&out[..])
                            .unwrap()
                            .read_to_end(&mut back)
                            .unwrap();
                    }
                    _ => {
                        let mut fresh = BytesMut::new();
                        codec.compress(&input, &mut fresh).unwrap();
                        assert_eq!(out, fresh, "{codec:?}");
                        continue;
                    }
                }
                assert_eq!(back, input, "{codec:?}, {n} bytes");
            }
        }
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
