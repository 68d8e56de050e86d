//! Zigzag varints and varlongs as Kafka's record format writes them, straight into a byte slice or
//! `BufMut` with no intermediate allocation.

use bytes::BufMut;

/// Zigzag-encode a 64-bit value.
#[inline]
pub fn zigzag64(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Bytes an unsigned LEB128 value takes.
#[inline]
pub fn uvarint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Bytes a zigzag varint/varlong takes.
#[inline]
pub fn varlong_len(v: i64) -> usize {
    uvarint_len(zigzag64(v))
}

/// Write an unsigned LEB128 value.
#[inline]
pub fn put_uvarint<B: BufMut>(buf: &mut B, mut v: u64) {
    while v >= 0x80 {
        buf.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

/// Write a zigzag varlong (varints are the same encoding for values that fit in 32 bits).
#[inline]
pub fn put_varlong<B: BufMut>(buf: &mut B, v: i64) {
    put_uvarint(buf, zigzag64(v));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_match_what_is_written() {
        for v in [
            0i64,
            1,
            -1,
            63,
            -64,
            64,
            8191,
            -8192,
            1 << 40,
            i64::MIN,
            i64::MAX,
        ] {
            let mut out = Vec::new();
            put_varlong(&mut out, v);
            assert_eq!(out.len(), varlong_len(v), "value {v}");
        }
    }

    #[test]
    fn zigzag_small_values() {
        let mut out = Vec::new();
        put_varlong(&mut out, -1);
        put_varlong(&mut out, 1);
        put_varlong(&mut out, 150);
        assert_eq!(out, [0x01, 0x02, 0xac, 0x02]);
    }
}
