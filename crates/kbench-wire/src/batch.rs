//! The RecordBatch v2 encoder (magic 2), kbench's hot path: records are written straight into one
//! reused buffer, each record's size computed once from its parts, with no per-record allocation.
//!
//! Layout (61-byte header, then records): baseOffset i64, batchLength i32, partitionLeaderEpoch i32,
//! magic i8, crc u32 (CRC-32C from attributes to the end), attributes i16, lastOffsetDelta i32,
//! baseTimestamp i64, maxTimestamp i64, producerId i64, producerEpoch i16, baseSequence i32,
//! recordCount i32. Compression covers the records only.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{BufMut, Bytes, BytesMut};

use crate::compression::Compression;
use crate::varint::varlong_len;

/// Size of the RecordBatch v2 header.
pub const BATCH_HEADER_LEN: usize = 61;
const CRC_OFFSET: usize = 17;
const ATTRIBUTES_OFFSET: usize = 21;

/// One record header: a key (headers may repeat keys) and an optional value.
#[derive(Debug, Clone, Copy)]
pub struct RecordHeader<'a> {
    pub key: &'a [u8],
    pub value: Option<&'a [u8]>,
}

/// Milliseconds since the Unix epoch, from the system clock.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Builds one record batch at a time, reusing its buffers from batch to batch.
#[derive(Debug)]
pub struct RecordBatchBuilder {
    compression: Compression,
    /// Uncompressed: header placeholder then records. Compressed: records only.
    records: BytesMut,
    /// The finished batch for compressed codecs (header, then compressed records).
    out: BytesMut,
    /// Compression contexts kept from batch to batch.
    compressor: crate::compression::Compressor,
    base_timestamp: i64,
    max_timestamp: i64,
    count: i32,
    /// Size of the last finished batch: the next one reserves this much at once instead of growing.
    last_len: usize,
    /// The producer the next finished batch names (idempotent and transactional produce); taken by
    /// `finish`, so each batch is stamped once.
    producer: Option<BatchProducer>,
}

/// The producer fields of an idempotent (or transactional) batch: the id and epoch InitProducerId
/// gave, and the sequence number of the batch's first record in its partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchProducer {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    /// Part of a transaction: the batch's attributes carry the transactional bit.
    pub transactional: bool,
}

/// Bit 4 of a batch's attributes: the batch belongs to a transaction.
pub const TRANSACTIONAL_BIT: i16 = 0x10;

/// The sequence number after `records` records from `sequence`, wrapping past i32::MAX to 0 as
/// Kafka's producer and broker do.
pub fn next_sequence(sequence: i32, records: i32) -> i32 {
    ((i64::from(sequence) + i64::from(records)) % (i64::from(i32::MAX) + 1)) as i32
}

impl RecordBatchBuilder {
    pub fn new(compression: Compression) -> Self {
        let mut builder = Self {
            compression,
            records: BytesMut::with_capacity(16 * 1024),
            out: BytesMut::new(),
            compressor: Default::default(),
            base_timestamp: 0,
            max_timestamp: 0,
            count: 0,
            last_len: 16 * 1024,
            producer: None,
        };
        builder.start(now_ms());
        builder
    }

    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// Begin a new, empty batch whose base timestamp is the current time.
    pub fn start_now(&mut self) {
        self.start(now_ms());
    }

    /// Begin a new, empty batch with the given base timestamp (ms since the epoch).
    pub fn start(&mut self, base_timestamp_ms: i64) {
        self.records.clear();
        self.records.reserve(self.last_len);
        if self.compression == Compression::None {
            self.records.put_bytes(0, BATCH_HEADER_LEN);
        }
        self.base_timestamp = base_timestamp_ms;
        self.max_timestamp = base_timestamp_ms;
        self.count = 0;
    }

    pub fn record_count(&self) -> i32 {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Uncompressed size of the batch so far, header included: what `batch.size` is compared against.
    pub fn uncompressed_len(&self) -> usize {
        match self.compression {
            Compression::None => self.records.len(),
            _ => self.records.len() + BATCH_HEADER_LEN,
        }
    }

    /// Append a record. `timestamp_ms` is its CreateTime; the delta from the base is a varlong.
    pub fn append(
        &mut self,
        timestamp_ms: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[RecordHeader<'_>],
    ) {
        let timestamp_delta = timestamp_ms - self.base_timestamp;
        let offset_delta = i64::from(self.count);
        let body_len = 1
            + varlong_len(timestamp_delta)
            + varlong_len(offset_delta)
            + bytes_field_len(key)
            + bytes_field_len(value)
            + varlong_len(headers.len() as i64)
            + headers
                .iter()
                .map(|h| bytes_field_len(Some(h.key)) + bytes_field_len(h.value))
                .sum::<usize>();
        // Reserve once, then write every byte of the record into the spare capacity: no capacity
        // check per field and no zero-fill of bytes about to be overwritten.
        let start = self.records.len();
        let total = varlong_len(body_len as i64) + body_len;
        self.records.reserve(total);
        let mut w = SliceWriter {
            buf: &mut self.records.spare_capacity_mut()[..total],
            pos: 0,
        };
        w.varlong(body_len as i64);
        w.byte(0); // record attributes: unused
        w.varlong(timestamp_delta);
        w.varlong(offset_delta);
        w.bytes_field(key);
        w.bytes_field(value);
        w.varlong(headers.len() as i64);
        for h in headers {
            w.bytes_field(Some(h.key));
            w.bytes_field(h.value);
        }
        // The length is the writer's position, not the computed `total`: the writer writes
        // sequentially from 0 into a slice of `total` bytes (an overrun panics on the slice's
        // bounds), so [start, start + pos) is initialised whatever the arithmetic above says. That
        // the two agree is a matter of encoding, checked in debug builds and by the round-trip
        // tests against kafka-protocol's decoder, not of memory safety — so no release-mode check
        // per record.
        debug_assert_eq!(w.pos, total, "record size computed from its fields");
        let written = w.pos;
        // SAFETY: the writer initialised every byte of [start, start + written), and `reserve`
        // made at least `total` >= `written` bytes of capacity.
        unsafe { self.records.set_len(start + written) };
        self.count += 1;
        self.max_timestamp = self.max_timestamp.max(timestamp_ms);
    }

    /// Name a producer in the next finished batch (its id, epoch and first sequence number); without
    /// this a batch is not idempotent (producer id, epoch and sequence all -1).
    pub fn set_producer(&mut self, producer: BatchProducer) {
        self.producer = Some(producer);
    }

    /// `finish` with a compression context shared by several builders (one per partition, when
    /// records are keyed): the builder's own context is left empty.
    pub fn finish_sharing(
        &mut self,
        compressor: &mut crate::compression::Compressor,
    ) -> std::io::Result<Bytes> {
        std::mem::swap(&mut self.compressor, compressor);
        let batch = self.finish();
        std::mem::swap(&mut self.compressor, compressor);
        batch
    }

    /// Close the batch: compress, write the header and CRC, and hand out the complete batch bytes.
    /// The builder is then empty, ready for `start`.
    pub fn finish(&mut self) -> std::io::Result<Bytes> {
        let mut batch = if self.compression == Compression::None {
            self.records.split()
        } else {
            self.out.clear();
            self.out.reserve(self.last_len);
            self.out.put_bytes(0, BATCH_HEADER_LEN);
            self.compressor
                .compress(self.compression, &self.records, &mut self.out)?;
            self.records.clear();
            self.out.split()
        };
        let producer = self.producer.take();
        let attributes = self.compression.attribute_bits()
            | if producer.is_some_and(|p| p.transactional) {
                TRANSACTIONAL_BIT
            } else {
                0
            };
        let total = batch.len();
        let batch_length = batch_length(total).inspect_err(|_| {
            self.records.clear();
            self.count = 0;
        })?;
        self.last_len = self.uncompressed_hint(total);
        let header = &mut batch[..BATCH_HEADER_LEN];
        let mut h = &mut header[..];
        h.put_i64(0); // baseOffset: the broker assigns offsets
        h.put_i32(batch_length); // from partitionLeaderEpoch to the end
        h.put_i32(-1); // partitionLeaderEpoch: set by the broker
        h.put_i8(2); // magic
        h.put_u32(0); // crc, patched below
        h.put_i16(attributes);
        h.put_i32(self.count - 1); // lastOffsetDelta
        h.put_i64(self.base_timestamp);
        h.put_i64(self.max_timestamp);
        match producer {
            Some(p) => {
                h.put_i64(p.producer_id);
                h.put_i16(p.producer_epoch);
                h.put_i32(p.base_sequence);
            }
            None => {
                h.put_i64(-1); // producerId: not idempotent
                h.put_i16(-1); // producerEpoch
                h.put_i32(-1); // baseSequence
            }
        }
        h.put_i32(self.count);
        let crc = crc32c::crc32c(&batch[ATTRIBUTES_OFFSET..]);
        batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
        self.count = 0;
        Ok(batch.freeze())
    }
}

/// A batch's `batchLength` field (its size less the offset and length fields), or an error when the
/// batch is past what the i32 field holds: Kafka's 2 GiB limit is an error, never a silent wrap.
pub fn batch_length(total: usize) -> std::io::Result<i32> {
    total
        .checked_sub(12)
        .and_then(|n| i32::try_from(n).ok())
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("a {total}-byte record batch is larger than Kafka's 2 GiB batch limit"),
            )
        })
}

impl RecordBatchBuilder {
    /// What to reserve for the next batch: the last one's size, plus a little.
    fn uncompressed_hint(&self, finished_len: usize) -> usize {
        finished_len + finished_len / 8 + 64
    }
}

#[inline]
fn bytes_field_len(field: Option<&[u8]>) -> usize {
    match field {
        None => 1,
        Some(b) => varlong_len(b.len() as i64) + b.len(),
    }
}

/// Writes sequentially into uninitialised capacity sized to fit exactly what is written; indexing
/// keeps every write in bounds.
struct SliceWriter<'a> {
    buf: &'a mut [std::mem::MaybeUninit<u8>],
    pos: usize,
}

impl SliceWriter<'_> {
    #[inline]
    fn byte(&mut self, b: u8) {
        self.buf[self.pos].write(b);
        self.pos += 1;
    }

    #[inline]
    fn varlong(&mut self, v: i64) {
        let mut u = crate::varint::zigzag64(v);
        while u >= 0x80 {
            self.byte((u as u8) | 0x80);
            u >>= 7;
        }
        self.byte(u as u8);
    }

    #[inline]
    fn bytes_field(&mut self, field: Option<&[u8]>) {
        match field {
            None => self.varlong(-1),
            Some(b) => {
                self.varlong(b.len() as i64);
                let dst = &mut self.buf[self.pos..self.pos + b.len()];
                // SAFETY: `dst` is exactly `b.len()` elements; MaybeUninit<u8> has u8's layout.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        b.as_ptr(),
                        dst.as_mut_ptr().cast::<u8>(),
                        b.len(),
                    )
                };
                self.pos += b.len();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::records::RecordBatchDecoder;

    #[test]
    fn header_fields_and_crc_are_what_kafka_expects() {
        let mut b = RecordBatchBuilder::new(Compression::None);
        b.start(1_000);
        b.append(1_000, None, Some(b"a"), &[]);
        b.append(1_500, Some(b"k"), Some(b"bb"), &[]);
        let batch = b.finish().unwrap();
        assert_eq!(
            i32::from_be_bytes(batch[8..12].try_into().unwrap()) as usize,
            batch.len() - 12
        );
        assert_eq!(batch[16], 2);
        assert_eq!(i32::from_be_bytes(batch[23..27].try_into().unwrap()), 1);
        assert_eq!(i64::from_be_bytes(batch[35..43].try_into().unwrap()), 1_500);
        assert_eq!(i32::from_be_bytes(batch[57..61].try_into().unwrap()), 2);
        let crc = u32::from_be_bytes(batch[17..21].try_into().unwrap());
        assert_eq!(crc, crc32c::crc32c(&batch[21..]));
    }

    #[test]
    fn every_compression_decodes_with_kafka_protocol() {
        for c in Compression::ALL {
            let mut b = RecordBatchBuilder::new(c);
            let base = now_ms();
            b.start(base);
            for i in 0..1000u32 {
                let v = format!("value-{i}");
                let hs = [
                    RecordHeader {
                        key: b"h",
                        value: Some(b"1"),
                    },
                    RecordHeader {
                        key: b"h",
                        value: None,
                    },
                ];
                b.append(
                    base + i64::from(i),
                    Some(&i.to_be_bytes()),
                    Some(v.as_bytes()),
                    &hs,
                );
            }
            let mut batch = b.finish().unwrap();
            let set = RecordBatchDecoder::decode(&mut batch).unwrap();
            assert_eq!(set.records.len(), 1000, "{c:?}");
            assert_eq!(set.records[999].value.as_deref(), Some(&b"value-999"[..]));
            assert_eq!(set.records[999].offset, 999);
            assert_eq!(set.records[999].timestamp, base + 999);
            assert_eq!(
                set.records[0].headers.len(),
                1,
                "kafka-protocol folds duplicate keys"
            );
        }
    }

    #[test]
    fn a_producer_stamps_one_batch_and_kafka_protocol_reads_it() {
        for c in [Compression::None, Compression::Zstd] {
            let mut b = RecordBatchBuilder::new(c);
            b.set_producer(BatchProducer {
                producer_id: 7_000_000_001,
                producer_epoch: 3,
                base_sequence: 40,
                transactional: true,
            });
            for i in 0..5u8 {
                b.append(now_ms(), None, Some(&[i]), &[]);
            }
            let mut batch = b.finish().unwrap();
            let crc = u32::from_be_bytes(batch[17..21].try_into().unwrap());
            assert_eq!(crc, crc32c::crc32c(&batch[21..]), "{c:?}");
            let set = RecordBatchDecoder::decode(&mut batch).unwrap();
            let r = &set.records[4];
            assert_eq!(r.producer_id, 7_000_000_001, "{c:?}");
            assert_eq!(r.producer_epoch, 3);
            assert_eq!(
                r.sequence, 44,
                "a record's sequence is the base plus its delta"
            );
            assert!(r.transactional);
            // The stamp is for one batch: the next is not idempotent.
            b.start_now();
            b.append(now_ms(), None, Some(b"x"), &[]);
            let mut next = b.finish().unwrap();
            let set = RecordBatchDecoder::decode(&mut next).unwrap();
            assert_eq!(set.records[0].producer_id, -1);
            assert!(!set.records[0].transactional);
        }
    }

    #[test]
    fn sequences_wrap_past_i32_max_as_kafka_does() {
        assert_eq!(next_sequence(0, 5), 5);
        assert_eq!(next_sequence(i32::MAX - 1, 1), i32::MAX);
        assert_eq!(next_sequence(i32::MAX, 1), 0);
        assert_eq!(next_sequence(i32::MAX - 2, 10), 7);
    }

    #[test]
    fn builder_is_reusable_across_batches() {
        let mut b = RecordBatchBuilder::new(Compression::Lz4);
        for n in [1, 10, 100] {
            b.start_now();
            for _ in 0..n {
                b.append(now_ms(), None, Some(&[1u8; 100]), &[]);
            }
            let mut batch = b.finish().unwrap();
            assert_eq!(
                RecordBatchDecoder::decode(&mut batch)
                    .unwrap()
                    .records
                    .len(),
                n
            );
        }
    }

    #[test]
    fn batch_length_refuses_past_two_gib() {
        assert_eq!(batch_length(61).unwrap(), 49);
        assert_eq!(batch_length(i32::MAX as usize + 12).unwrap(), i32::MAX);
        let e = batch_length(i32::MAX as usize + 13).unwrap_err();
        assert!(e.to_string().contains("2 GiB"), "{e}");
        assert!(batch_length(3).is_err());
    }

    /// A real batch just past 2 GiB: an error naming the limit, never a wrapped length; the builder
    /// stays usable.
    #[test]
    fn a_batch_over_two_gib_is_an_error() {
        let value = vec![7u8; (i32::MAX as usize) + 1];
        let mut b = RecordBatchBuilder::new(Compression::None);
        b.append(0, None, Some(&value), &[]);
        drop(value);
        let e = b.finish().unwrap_err();
        assert!(e.to_string().contains("larger than Kafka's 2 GiB"), "{e}");
        b.start(0);
        b.append(0, None, Some(b"ok"), &[]);
        let batch = b.finish().unwrap();
        assert_eq!(
            batch_length(batch.len()).unwrap() as usize,
            batch.len() - 12
        );
    }
}
