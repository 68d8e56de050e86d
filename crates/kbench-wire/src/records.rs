//! The RecordBatch v2 decoder: zero-copy views over the batch bytes (or over one reused decompression
//! buffer), CRC-32C checked, and every count and length bounded by the bytes actually present, so that
//! corrupt or truncated input is an error, never a panic or a huge allocation. No allocation per
//! record: records are handed to a visitor as borrowed views; headers are a lazy list (duplicate keys
//! kept, in order).

use std::io::Read;

use crate::batch::BATCH_HEADER_LEN;
use crate::compression::Compression;

/// Why bytes are not a valid record batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("record batch truncated: needs {needed} bytes, {available} present")]
    Truncated { needed: usize, available: usize },
    #[error("record batch magic {0} is not supported (only RecordBatch v2, magic 2)")]
    Magic(i8),
    #[error(
        "record batch CRC-32C mismatch: header says {expected:#010x}, bytes give {actual:#010x}"
    )]
    Crc { expected: u32, actual: u32 },
    #[error("record batch claims {count} records but only {bytes} bytes of records are present")]
    RecordCount { count: i32, bytes: usize },
    #[error("record batch length {0} is invalid")]
    Length(i32),
    #[error("malformed varint at byte {0} of the records")]
    Varint(usize),
    #[error("record {index}: {what}")]
    Record { index: i32, what: &'static str },
    #[error("record batch compression id {0} is unknown")]
    CompressionId(i16),
    #[error("record batch {codec} data is corrupt: {reason}")]
    Decompress { codec: &'static str, reason: String },
    #[error("record batch decompresses to more than {0} bytes")]
    TooLarge(usize),
}

/// The 61-byte RecordBatch v2 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

impl BatchHeader {
    pub fn compression_id(&self) -> i16 {
        self.attributes & 0x07
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes & 0x10 != 0
    }
    pub fn is_control(&self) -> bool {
        self.attributes & 0x20 != 0
    }
}

/// One record, borrowed from the batch (or the decompression buffer).
#[derive(Debug, Clone, Copy)]
pub struct RecordView<'a> {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    header_count: usize,
    headers: &'a [u8],
}

impl<'a> RecordView<'a> {
    pub fn header_count(&self) -> usize {
        self.header_count
    }

    /// The headers in wire order; duplicate keys are kept.
    pub fn headers(&self) -> HeaderIter<'a> {
        HeaderIter {
            buf: self.headers,
            pos: 0,
            left: self.header_count,
        }
    }
}

/// Iterates a record's headers as `(key, value)` views. Already validated when the record was decoded.
#[derive(Debug, Clone)]
pub struct HeaderIter<'a> {
    buf: &'a [u8],
    pos: usize,
    left: usize,
}

impl<'a> Iterator for HeaderIter<'a> {
    type Item = (&'a [u8], Option<&'a [u8]>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let key = read_bytes(self.buf, &mut self.pos).ok()??;
        let value = read_bytes(self.buf, &mut self.pos).ok()?;
        Some((key, value))
    }
}

/// Largest decompressed batch accepted (a decompression bomb is an error, not an allocation).
pub const MAX_DECOMPRESSED: usize = 256 * 1024 * 1024;

/// The smallest possible encoded record: length, attributes, timestamp delta, offset delta, key
/// length, value length, header count: one byte each.
const MIN_RECORD_LEN: usize = 7;

/// Decodes record batches, reusing one decompression buffer, and the zstd context, from batch to
/// batch (creating a zstd context per batch was 60 % of a zstd consumer's CPU).
#[derive(Default)]
pub struct BatchDecoder {
    decompressed: Vec<u8>,
    zstd: Option<zstd::zstd_safe::DCtx<'static>>,
}

impl std::fmt::Debug for BatchDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchDecoder")
            .field("decompressed", &self.decompressed.len())
            .finish()
    }
}

/// What a call to [`BatchDecoder::decode_all`] found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DecodeSummary {
    pub batches: usize,
    pub records: u64,
    /// Bytes at the end that were not a whole batch (a Fetch response may end with a partial batch).
    pub partial_tail: usize,
}

impl BatchDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Parse and check the header of the batch at the start of `input`; returns it and the batch's
    /// total length.
    pub fn header(input: &[u8]) -> Result<(BatchHeader, usize), DecodeError> {
        if input.len() < BATCH_HEADER_LEN {
            return Err(DecodeError::Truncated {
                needed: BATCH_HEADER_LEN,
                available: input.len(),
            });
        }
        let i64_at = |o: usize| i64::from_be_bytes(input[o..o + 8].try_into().expect("8 bytes"));
        let i32_at = |o: usize| i32::from_be_bytes(input[o..o + 4].try_into().expect("4 bytes"));
        let i16_at = |o: usize| i16::from_be_bytes(input[o..o + 2].try_into().expect("2 bytes"));
        let header = BatchHeader {
            base_offset: i64_at(0),
            batch_length: i32_at(8),
            partition_leader_epoch: i32_at(12),
            magic: input[16] as i8,
            crc: i32_at(17) as u32,
            attributes: i16_at(21),
            last_offset_delta: i32_at(23),
            base_timestamp: i64_at(27),
            max_timestamp: i64_at(35),
            producer_id: i64_at(43),
            producer_epoch: i16_at(51),
            base_sequence: i32_at(53),
            record_count: i32_at(57),
        };
        if header.magic != 2 {
            return Err(DecodeError::Magic(header.magic));
        }
        if header.batch_length < (BATCH_HEADER_LEN - 12) as i32 {
            return Err(DecodeError::Length(header.batch_length));
        }
        let total = header.batch_length as usize + 12;
        if input.len() < total {
            return Err(DecodeError::Truncated {
                needed: total,
                available: input.len(),
            });
        }
        Ok((header, total))
    }

    /// Decode one complete batch at the start of `input`, handing each record to `visit`. Returns the
    /// header and the batch's length in bytes.
    pub fn decode_batch<F>(
        &mut self,
        input: &[u8],
        mut visit: F,
    ) -> Result<(BatchHeader, usize), DecodeError>
    where
        F: FnMut(&BatchHeader, RecordView<'_>),
    {
        let (header, total) = Self::header(input)?;
        let crc = crc32c::crc32c(&input[21..total]);
        if crc != header.crc {
            return Err(DecodeError::Crc {
                expected: header.crc,
                actual: crc,
            });
        }
        if header.record_count < 0 {
            return Err(DecodeError::RecordCount {
                count: header.record_count,
                bytes: total - BATCH_HEADER_LEN,
            });
        }
        let body = &input[BATCH_HEADER_LEN..total];
        let records: &[u8] = match header.compression_id() {
            0 => body,
            id => {
                let codec = match id {
                    1 => Compression::Gzip,
                    2 => Compression::Snappy,
                    3 => Compression::Lz4,
                    4 => Compression::Zstd,
                    other => return Err(DecodeError::CompressionId(other)),
                };
                if codec == Compression::Zstd {
                    let dctx = self.zstd.get_or_insert_with(zstd::zstd_safe::DCtx::create);
                    zstd_into(dctx, body, &mut self.decompressed).map_err(|reason| {
                        DecodeError::Decompress {
                            codec: codec.name(),
                            reason,
                        }
                    })?;
                } else {
                    decompress(codec, body, &mut self.decompressed)?;
                }
                &self.decompressed
            }
        };
        if header.record_count as usize > records.len() / MIN_RECORD_LEN {
            return Err(DecodeError::RecordCount {
                count: header.record_count,
                bytes: records.len(),
            });
        }
        decode_records(&header, records, &mut visit)?;
        Ok((header, total))
    }

    /// Decode every batch in a records field (e.g. from a Fetch response). A partial batch at the very
    /// end is not an error (brokers cut responses at max_bytes); it is reported in the summary.
    pub fn decode_all<F>(
        &mut self,
        mut input: &[u8],
        mut visit: F,
    ) -> Result<DecodeSummary, DecodeError>
    where
        F: FnMut(&BatchHeader, RecordView<'_>),
    {
        let mut summary = DecodeSummary::default();
        while !input.is_empty() {
            match Self::header(input) {
                Err(DecodeError::Truncated { .. }) => {
                    summary.partial_tail = input.len();
                    break;
                }
                Err(e) => return Err(e),
                Ok(_) => {}
            }
            let (header, len) = self.decode_batch(input, &mut visit)?;
            summary.batches += 1;
            summary.records += header.record_count as u64;
            input = &input[len..];
        }
        Ok(summary)
    }
}

fn decode_records<F>(header: &BatchHeader, records: &[u8], visit: &mut F) -> Result<(), DecodeError>
where
    F: FnMut(&BatchHeader, RecordView<'_>),
{
    let mut pos = 0usize;
    for index in 0..header.record_count {
        let bad = |what| DecodeError::Record { index, what };
        let len = read_varint(records, &mut pos)?;
        if len < 0 || len as usize > records.len() - pos {
            return Err(bad("length runs past the batch"));
        }
        let end = pos + len as usize;
        let rec = &records[..end];
        if pos >= end {
            return Err(bad("empty record"));
        }
        pos += 1; // attributes
        let timestamp_delta = read_varlong(rec, &mut pos)?;
        let offset_delta = read_varint(rec, &mut pos)?;
        let key = read_bytes(rec, &mut pos).map_err(|_| bad("key runs past the record"))?;
        let value = read_bytes(rec, &mut pos).map_err(|_| bad("value runs past the record"))?;
        let header_count = read_varint(rec, &mut pos)?;
        if header_count < 0 || header_count as usize > (end - pos) / 2 {
            return Err(bad("header count exceeds the record"));
        }
        let headers_start = pos;
        for _ in 0..header_count {
            match read_bytes(rec, &mut pos) {
                Ok(Some(_)) => {}
                Ok(None) => return Err(bad("null header key")),
                Err(_) => return Err(bad("header runs past the record")),
            }
            read_bytes(rec, &mut pos).map_err(|_| bad("header runs past the record"))?;
        }
        if pos != end {
            return Err(bad("length does not match its fields"));
        }
        visit(
            header,
            RecordView {
                offset: header.base_offset + i64::from(offset_delta),
                timestamp: header.base_timestamp.wrapping_add(timestamp_delta),
                key,
                value,
                header_count: header_count as usize,
                headers: &rec[headers_start..end],
            },
        );
    }
    Ok(())
}

/// What a `read_committed` reader leaves out: the records of aborted transactions, which a Fetch
/// response lists per partition as (producer id, first offset). A transactional batch of a producer
/// whose aborted transaction began at or before the batch's last offset is skipped, until that
/// producer's control batch (the abort marker) closes it — Kafka's consumer reads the same way.
/// Control batches themselves are never records for the reader.
#[derive(Debug, Clone, Default)]
pub struct AbortedFilter {
    /// The aborted transactions not yet reached, by first offset, latest first (popped from the end).
    pending: Vec<(i64, i64)>,
    /// Producers whose aborted transaction the reading is inside.
    open: Vec<i64>,
    /// The last batch judged (its base offset), so that every record of a batch costs one lookup.
    last: Option<(i64, bool)>,
}

impl AbortedFilter {
    /// A filter over one partition's answer: `aborted` as the response lists it.
    pub fn new(aborted: &[(i64, i64)]) -> AbortedFilter {
        let mut pending = aborted.to_vec();
        pending.sort_by_key(|(_, first)| std::cmp::Reverse(*first));
        AbortedFilter {
            pending,
            open: Vec::new(),
            last: None,
        }
    }

    /// Whether nothing is filtered (read uncommitted, or no aborted transaction in the answer).
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty() && self.open.is_empty()
    }

    /// Whether the records of the batch `header` are left out (called for each record, in order).
    pub fn skips(&mut self, header: &BatchHeader) -> bool {
        if let Some((base, skip)) = self.last
            && base == header.base_offset
        {
            return skip;
        }
        let last_offset = header.base_offset + i64::from(header.last_offset_delta);
        while let Some(&(producer, first)) = self.pending.last() {
            if first > last_offset {
                break;
            }
            self.pending.pop();
            if !self.open.contains(&producer) {
                self.open.push(producer);
            }
        }
        let skip = if header.is_control() {
            // The marker that ends the producer's transaction: an abort, when it is open here.
            self.open.retain(|p| *p != header.producer_id);
            true
        } else {
            header.is_transactional() && self.open.contains(&header.producer_id)
        };
        self.last = Some((header.base_offset, skip));
        skip
    }
}

/// The first hole in the offsets that a Fetch response's batches cover, reading from `from`: the
/// offsets `[start, end)` that no batch holds although a later batch, at `end`, is present. Batches
/// that end before `from` are passed over (a Fetch returns whole batches); only complete batch
/// headers are read (no CRC check, no decompression), and a partial batch at the end is ignored.
///
/// On a healthy partition there is no hole: offsets are contiguous from batch to batch. A hole means
/// either records not yet readable below ones that are (seen with Tansu, which raises the high
/// watermark before the batch is stored) or offsets removed by compaction.
pub fn first_gap(mut input: &[u8], from: i64) -> Option<std::ops::Range<i64>> {
    let mut expect = from;
    while let Ok((header, len)) = BatchDecoder::header(input) {
        let last = header.base_offset + i64::from(header.last_offset_delta);
        if last >= expect {
            if header.base_offset > expect {
                return Some(expect..header.base_offset);
            }
            expect = last + 1;
        }
        input = &input[len..];
    }
    None
}

/// The offset after the last complete batch of `input` that ends at or past `from`: where a
/// consumer that asked from `from` fetches next. Headers only; `None` when no complete batch
/// reaches `from`.
pub fn batches_end(mut input: &[u8], from: i64) -> Option<i64> {
    let mut end = None;
    while let Ok((header, len)) = BatchDecoder::header(input) {
        let last = header.base_offset + i64::from(header.last_offset_delta);
        if last >= from {
            end = Some(last + 1);
        }
        input = &input[len..];
    }
    end
}

/// Records in the complete batches of `input` (headers only).
pub fn batch_records(mut input: &[u8]) -> u64 {
    let mut n = 0u64;
    while let Ok((header, len)) = BatchDecoder::header(input) {
        n += header.record_count.max(0) as u64;
        input = &input[len..];
    }
    n
}

/// A zigzag varlong, at most 10 bytes.
#[inline]
fn read_varlong(buf: &[u8], pos: &mut usize) -> Result<i64, DecodeError> {
    let start = *pos;
    let mut raw: u64 = 0;
    for shift in (0..70).step_by(7) {
        let Some(&b) = buf.get(*pos) else {
            return Err(DecodeError::Varint(start));
        };
        *pos += 1;
        raw |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64));
        }
    }
    Err(DecodeError::Varint(start))
}

/// A zigzag varint, at most 5 bytes, that must fit in 32 bits.
#[inline]
fn read_varint(buf: &[u8], pos: &mut usize) -> Result<i32, DecodeError> {
    let start = *pos;
    let v = read_varlong(buf, pos)?;
    if *pos - start > 5 {
        return Err(DecodeError::Varint(start));
    }
    i32::try_from(v).map_err(|_| DecodeError::Varint(start))
}

/// A varint length then that many bytes; -1 is null.
#[inline]
fn read_bytes<'a>(buf: &'a [u8], pos: &mut usize) -> Result<Option<&'a [u8]>, DecodeError> {
    let start = *pos;
    let len = read_varint(buf, pos)?;
    if len == -1 {
        return Ok(None);
    }
    if len < 0 || len as usize > buf.len() - *pos {
        return Err(DecodeError::Varint(start));
    }
    let s = &buf[*pos..*pos + len as usize];
    *pos += len as usize;
    Ok(Some(s))
}

/// Decompress `input` into `out` (cleared first, capacity kept), refusing more than
/// [`MAX_DECOMPRESSED`] bytes.
pub fn decompress(codec: Compression, input: &[u8], out: &mut Vec<u8>) -> Result<(), DecodeError> {
    out.clear();
    let corrupt = |reason: String| DecodeError::Decompress {
        codec: codec.name(),
        reason,
    };
    let limit = MAX_DECOMPRESSED as u64 + 1;
    match codec {
        Compression::None => out.extend_from_slice(input),
        Compression::Gzip => {
            flate2::read::GzDecoder::new(input)
                .take(limit)
                .read_to_end(out)
                .map_err(|e| corrupt(e.to_string()))?;
        }
        Compression::Lz4 => {
            lz4_flex::frame::FrameDecoder::new(input)
                .take(limit)
                .read_to_end(out)
                .map_err(|e| corrupt(e.to_string()))?;
        }
        Compression::Zstd => {
            zstd::stream::read::Decoder::with_buffer(input)
                .map_err(|e| corrupt(e.to_string()))?
                .take(limit)
                .read_to_end(out)
                .map_err(|e| corrupt(e.to_string()))?;
        }
        Compression::Snappy => snappy_decompress(input, out).map_err(corrupt)?,
    }
    if out.len() > MAX_DECOMPRESSED {
        return Err(DecodeError::TooLarge(MAX_DECOMPRESSED));
    }
    Ok(())
}

/// Decompress zstd frames with a context kept from batch to batch; at most `MAX_DECOMPRESSED`
/// bytes.
fn zstd_into(
    dctx: &mut zstd::zstd_safe::DCtx<'static>,
    input: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), String> {
    use zstd::zstd_safe::{InBuffer, OutBuffer, ResetDirective, get_error_name};
    out.clear();
    dctx.reset(ResetDirective::SessionOnly)
        .map_err(|c| get_error_name(c).to_string())?;
    let mut inb = InBuffer::around(input);
    loop {
        if out.len() > MAX_DECOMPRESSED {
            return Err(format!("more than {MAX_DECOMPRESSED} bytes"));
        }
        out.reserve(64 * 1024);
        let (hint, filled) = {
            let (pos, capacity) = (out.len(), out.capacity());
            let mut outb = OutBuffer::around_pos(out, pos);
            let hint = dctx
                .decompress_stream(&mut outb, &mut inb)
                .map_err(|c| get_error_name(c).to_string())?;
            (hint, outb.pos() == capacity)
        };
        let consumed = inb.pos() == input.len();
        if hint == 0 && consumed && out.len() <= MAX_DECOMPRESSED {
            return Ok(());
        }
        if consumed && hint != 0 && !filled {
            return Err("the zstd frame is truncated".into());
        }
    }
}

const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\x00";

/// Snappy as Java writes it (xerial framing: 16-byte header, then length-prefixed raw blocks), or raw
/// snappy as some clients write it.
/// The most a snappy block can expand: a 3-byte copy element writes at most 64 bytes.
const SNAPPY_MAX_EXPANSION: usize = 22;

fn snappy_decompress(input: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    let mut decoder = snap::raw::Decoder::new();
    let mut block = |b: &[u8], out: &mut Vec<u8>| -> Result<(), String> {
        let n = snap::raw::decompress_len(b).map_err(|e| e.to_string())?;
        if out.len() + n > MAX_DECOMPRESSED {
            return Err(format!("more than {MAX_DECOMPRESSED} bytes"));
        }
        // A snappy element expands at most 64 bytes from 3 (a two-byte-offset copy): a block that
        // claims more is corrupt. Checked before the output is sized, so that a few bytes claiming
        // 200 MB cannot make kbench zero-fill 200 MB (found by fuzzing).
        if n > b.len().saturating_mul(SNAPPY_MAX_EXPANSION) + 64 {
            return Err(format!(
                "a {}-byte snappy block claims {n} bytes, more than snappy can expand to",
                b.len()
            ));
        }
        let start = out.len();
        out.resize(start + n, 0);
        decoder
            .decompress(b, &mut out[start..])
            .map_err(|e| e.to_string())?;
        Ok(())
    };
    if input.len() < 16 || &input[..8] != XERIAL_MAGIC {
        return block(input, out);
    }
    let mut pos = 16;
    while pos < input.len() {
        let Some(len) = input.get(pos..pos + 4) else {
            return Err("truncated xerial block length".into());
        };
        let len = u32::from_be_bytes(len.try_into().expect("4 bytes")) as usize;
        pos += 4;
        let Some(b) = input.get(pos..pos + len) else {
            return Err("truncated xerial block".into());
        };
        block(b, out)?;
        pos += len;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// A partition of a read-committed answer: producer 7's transaction at 0..=2 aborted (its
    /// marker at 5), producer 8's at 3..=4 committed (its marker at 6), a plain batch at 7, and
    /// producer 7 again at 8 (a later transaction, not listed as aborted).
    #[test]
    fn aborted_transactions_are_left_out_until_their_marker() {
        use super::{AbortedFilter, BatchHeader};
        let batch = |base: i64, records: i32, producer: i64, attributes: i16| BatchHeader {
            base_offset: base,
            batch_length: 0,
            partition_leader_epoch: 0,
            magic: 2,
            crc: 0,
            attributes,
            last_offset_delta: records - 1,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id: producer,
            producer_epoch: 0,
            base_sequence: 0,
            record_count: records,
        };
        let (txn, control) = (0x10, 0x30);
        let batches = [
            batch(0, 3, 7, txn),
            batch(3, 2, 8, txn),
            batch(5, 1, 7, control),
            batch(6, 1, 8, control),
            batch(7, 1, -1, 0),
            batch(8, 2, 7, txn),
        ];
        let mut filter = AbortedFilter::new(&[(7, 0)]);
        assert!(!filter.is_empty());
        let kept: Vec<i64> = batches
            .iter()
            .flat_map(|b| (0..b.record_count).map(move |d| (b, b.base_offset + i64::from(d))))
            .filter(|(b, _)| !filter.skips(b))
            .map(|(_, offset)| offset)
            .collect();
        assert_eq!(kept, vec![3, 4, 7, 8, 9]);
        // Read uncommitted (nothing listed): only control batches are left out.
        let mut none = AbortedFilter::new(&[]);
        assert!(none.is_empty());
        let kept = batches.iter().filter(|b| !none.skips(b)).count();
        assert_eq!(kept, 4);
    }

    /// A tiny snappy block claiming 200 MB is refused before anything is allocated; the densest
    /// real snappy (runs of one byte) still decodes.
    #[test]
    fn a_snappy_block_cannot_claim_more_than_snappy_expands() {
        let mut out = Vec::new();
        // Varint 200 000 000, then a literal tag for 4 bytes.
        let claim = [0x80, 0x84, 0xaf, 0x5f, 0x0c, b'a', b'b', b'c', b'd'];
        let e = super::snappy_decompress(&claim, &mut out).unwrap_err();
        assert!(e.contains("more than snappy can expand to"), "{e}");
        assert!(out.capacity() < 1 << 20);
        let dense = vec![7u8; 4 << 20];
        let packed = snap::raw::Encoder::new().compress_vec(&dense).unwrap();
        super::snappy_decompress(&packed, &mut out).unwrap();
        assert_eq!(out, dense);
    }

    /// One zstd context serves batch after batch; a truncated frame or too much output is an error.
    #[test]
    fn a_kept_zstd_context_decodes_frame_after_frame_and_refuses_truncation() {
        let mut dctx = zstd::zstd_safe::DCtx::create();
        let mut out = Vec::new();
        for n in [0usize, 10, 100_000, 3] {
            let data: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
            let packed = zstd::bulk::compress(&data, 3).unwrap();
            zstd_into(&mut dctx, &packed, &mut out).unwrap();
            assert_eq!(out, data, "{n} bytes");
            if n > 10 {
                assert!(zstd_into(&mut dctx, &packed[..packed.len() / 2], &mut out).is_err());
            }
        }
        let big = vec![0u8; MAX_DECOMPRESSED + 1024];
        let packed = zstd::bulk::compress(&big, 3).unwrap();
        assert!(zstd_into(&mut dctx, &packed, &mut out).is_err());
    }

    use super::*;
    use crate::batch::{RecordBatchBuilder, RecordHeader, now_ms};

    fn sample(c: Compression, n: u32) -> bytes::Bytes {
        let mut b = RecordBatchBuilder::new(c);
        let base = now_ms();
        b.start(base);
        for i in 0..n {
            let hs = [
                RecordHeader {
                    key: b"k",
                    value: Some(b"1"),
                },
                RecordHeader {
                    key: b"k",
                    value: None,
                },
            ];
            b.append(
                base + i64::from(i) * 86_400_000,
                Some(&i.to_be_bytes()),
                Some(b"value"),
                &hs,
            );
        }
        b.finish().unwrap()
    }

    #[test]
    fn decodes_what_the_encoder_wrote_for_every_codec() {
        for c in Compression::ALL {
            let batch = sample(c, 100);
            let mut d = BatchDecoder::new();
            let mut seen = 0;
            d.decode_batch(&batch, |h, r| {
                assert_eq!(r.offset, i64::from(seen as i32));
                assert_eq!(
                    r.timestamp,
                    h.base_timestamp + seen * 86_400_000,
                    "varlong deltas > 25 days"
                );
                assert_eq!(r.key, Some(&(seen as u32).to_be_bytes()[..]));
                let hs: Vec<_> = r.headers().collect();
                assert_eq!(hs, vec![(&b"k"[..], Some(&b"1"[..])), (&b"k"[..], None)]);
                seen += 1;
            })
            .unwrap();
            assert_eq!(seen, 100, "{c:?}");
        }
    }

    #[test]
    fn crc_mismatch_and_truncation_are_errors() {
        let batch = sample(Compression::None, 3).to_vec();
        let mut bad = batch.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        let mut d = BatchDecoder::new();
        assert!(matches!(
            d.decode_batch(&bad, |_, _| {}),
            Err(DecodeError::Crc { .. })
        ));
        assert!(matches!(
            d.decode_batch(&batch[..batch.len() - 1], |_, _| {}),
            Err(DecodeError::Truncated { .. })
        ));
    }

    #[test]
    fn absurd_record_count_is_an_error_not_an_allocation() {
        let mut batch = sample(Compression::None, 3).to_vec();
        batch[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
        let crc = crc32c::crc32c(&batch[21..]);
        batch[17..21].copy_from_slice(&crc.to_be_bytes());
        let mut d = BatchDecoder::new();
        assert!(matches!(
            d.decode_batch(&batch, |_, _| {}),
            Err(DecodeError::RecordCount { .. })
        ));
    }

    #[test]
    fn partial_tail_is_reported_not_an_error() {
        let one = sample(Compression::None, 5);
        let mut two = one.to_vec();
        two.extend_from_slice(&one[..30]);
        let summary = BatchDecoder::new().decode_all(&two, |_, _| {}).unwrap();
        assert_eq!(
            summary,
            DecodeSummary {
                batches: 1,
                records: 5,
                partial_tail: 30
            }
        );
    }

    #[test]
    fn raw_snappy_is_read_too() {
        let raw = snap::raw::Encoder::new()
            .compress_vec(b"hello hello hello")
            .unwrap();
        let mut out = Vec::new();
        decompress(Compression::Snappy, &raw, &mut out).unwrap();
        assert_eq!(out, b"hello hello hello");
    }

    /// Batches of `n` records at each base offset, one after the other, as a Fetch carries them.
    fn at_offsets(batches: &[(i64, u32)]) -> Vec<u8> {
        let mut out = Vec::new();
        for &(base, n) in batches {
            let mut b = sample(Compression::None, n).to_vec();
            b[0..8].copy_from_slice(&base.to_be_bytes()); // not covered by the CRC
            out.extend_from_slice(&b);
        }
        out
    }

    #[test]
    fn contiguous_batches_have_no_gap() {
        let bytes = at_offsets(&[(10, 4), (14, 4), (18, 2)]);
        assert_eq!(first_gap(&bytes, 10), None);
        // Reading from inside the first batch, or past the end: still none.
        assert_eq!(first_gap(&bytes, 12), None);
        assert_eq!(first_gap(&bytes, 20), None);
        assert_eq!(first_gap(&[], 0), None);
    }

    #[test]
    fn a_missing_batch_is_a_gap_from_the_position_to_the_next_batch() {
        // 14..18 not there yet, 18.. is (the race seen with Tansu).
        let bytes = at_offsets(&[(10, 4), (18, 4)]);
        assert_eq!(first_gap(&bytes, 10), Some(14..18));
        assert_eq!(first_gap(&bytes, 13), Some(14..18));
        // Only a later batch: the hole starts at the position asked for.
        let later = at_offsets(&[(18, 4)]);
        assert_eq!(first_gap(&later, 14), Some(14..18));
        // Past the hole, the rest is contiguous.
        assert_eq!(first_gap(&bytes, 18), None);
        // A batch before the position is passed over, whatever precedes it.
        let before = at_offsets(&[(2, 4), (14, 4)]);
        assert_eq!(first_gap(&before, 14), None);
    }

    #[test]
    fn a_partial_batch_at_the_end_is_not_read_as_a_gap() {
        let mut bytes = at_offsets(&[(10, 4)]);
        let tail = at_offsets(&[(30, 4)]);
        bytes.extend_from_slice(&tail[..tail.len() / 2]);
        assert_eq!(first_gap(&bytes, 10), None);
    }
}
