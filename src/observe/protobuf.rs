//! A protobuf wire-format writer: varints, fixed-width fields, strings, bytes and nested
//! messages, written straight into one growable buffer.
//!
//! Owns the encoding rules (tags, varints, length prefixes), nothing about which message is
//! written (that is `observe::otlp_request`). Must not allocate per field: a nested message
//! is written in place, its length prefix reserved before it and fixed up when it ends, so a
//! whole request is one buffer that is reused from one request to the next.

/// Wire type of varint fields (integers, bools, enums).
const VARINT: u32 = 0;
/// Wire type of 64-bit fixed fields (`fixed64`, `double`).
const FIXED64: u32 = 1;
/// Wire type of length-delimited fields (strings, bytes, messages).
const LEN: u32 = 2;
/// Wire type of 32-bit fixed fields (`fixed32`).
const FIXED32: u32 = 5;

/// How many bytes the varint encoding of `v` takes (1 to 10).
#[inline]
pub fn varint_len(v: u64) -> usize {
    // one byte per started group of seven bits; 0 takes one byte
    let bits = 64 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Where an open nested message started: its length prefix's position and the bytes
/// reserved for it.
#[derive(Clone, Copy, Debug)]
#[must_use = "an open message must be closed"]
pub struct Open {
    prefix_at: usize,
    reserved: usize,
}

/// A protobuf message being written.
#[derive(Debug, Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// An empty writer with room for `bytes`.
    pub fn with_capacity(bytes: usize) -> Writer {
        Writer {
            buf: Vec::with_capacity(bytes),
        }
    }

    /// The bytes written so far.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// True if nothing was written.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Forgets what was written, keeping the buffer.
    pub fn clear(&mut self) {
        self.buf.clear();
    }

    /// Appends bytes that are already encoded fields (a prefix made once and reused).
    #[inline]
    pub fn raw(&mut self, encoded: &[u8]) {
        self.buf.extend_from_slice(encoded);
    }

    /// Makes room for `bytes` more without growing while they are written.
    #[inline]
    pub fn reserve(&mut self, bytes: usize) {
        self.buf.reserve(bytes);
    }

    /// The key and length of a length-delimited field whose `len` bytes the caller writes
    /// next (when it knows the length before writing, nothing needs moving).
    #[inline]
    pub fn len_prefix(&mut self, field: u32, len: usize) {
        self.key(field, LEN);
        self.varint(len as u64);
    }

    #[inline]
    fn varint(&mut self, mut v: u64) {
        if v < 0x80 {
            self.buf.push(v as u8);
            return;
        }
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    #[inline]
    fn key(&mut self, field: u32, wire_type: u32) {
        self.varint(u64::from((field << 3) | wire_type));
    }

    /// A `uint32`, `uint64` or enum field (written even when 0: callers skip defaults).
    #[inline]
    pub fn uint(&mut self, field: u32, v: u64) {
        self.key(field, VARINT);
        self.varint(v);
    }

    /// A `uint32` or `uint64` field, left out when 0 (proto3's default).
    #[inline]
    pub fn uint_unless_zero(&mut self, field: u32, v: u64) {
        if v != 0 {
            self.uint(field, v);
        }
    }

    /// An `int64` field (negative values take ten bytes, as protobuf's `int64` does).
    #[inline]
    pub fn int64(&mut self, field: u32, v: i64) {
        self.uint(field, v as u64);
    }

    /// A `bool` field.
    #[inline]
    pub fn bool(&mut self, field: u32, v: bool) {
        self.uint(field, u64::from(v));
    }

    /// A `fixed64` field.
    #[inline]
    pub fn fixed64(&mut self, field: u32, v: u64) {
        self.key(field, FIXED64);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// A `double` field.
    #[inline]
    pub fn double(&mut self, field: u32, v: f64) {
        self.fixed64(field, v.to_bits());
    }

    /// A `fixed32` field.
    #[inline]
    pub fn fixed32(&mut self, field: u32, v: u32) {
        self.key(field, FIXED32);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// A `bytes` field.
    #[inline]
    pub fn bytes_field(&mut self, field: u32, v: &[u8]) {
        self.key(field, LEN);
        self.varint(v.len() as u64);
        self.buf.extend_from_slice(v);
    }

    /// A `string` field.
    #[inline]
    pub fn string(&mut self, field: u32, v: &str) {
        self.bytes_field(field, v.as_bytes());
    }

    /// A `string` field, left out when empty (proto3's default).
    #[inline]
    pub fn string_unless_empty(&mut self, field: u32, v: &str) {
        if !v.is_empty() {
            self.string(field, v);
        }
    }

    /// Starts a nested message in `field`, with one byte reserved for its length.
    #[inline]
    pub fn open(&mut self, field: u32) -> Open {
        self.open_reserving(field, 1)
    }

    /// Starts a nested message whose length usually takes `reserved` bytes (a good guess
    /// saves moving the message when it is closed; any guess is correct).
    #[inline]
    pub fn open_reserving(&mut self, field: u32, reserved: usize) -> Open {
        self.key(field, LEN);
        let prefix_at = self.buf.len();
        self.buf.resize(prefix_at + reserved, 0);
        Open {
            prefix_at,
            reserved,
        }
    }

    /// Ends a nested message: writes its length before it, moving it if the length's varint
    /// does not take the bytes reserved.
    #[inline]
    pub fn close(&mut self, open: Open) {
        let body_at = open.prefix_at + open.reserved;
        let len = self.buf.len() - body_at;
        let needed = varint_len(len as u64);
        if needed != open.reserved {
            let end = self.buf.len();
            if needed > open.reserved {
                self.buf.resize(end + needed - open.reserved, 0);
                self.buf.copy_within(body_at..end, open.prefix_at + needed);
            } else {
                self.buf.copy_within(body_at..end, open.prefix_at + needed);
                self.buf.truncate(end - (open.reserved - needed));
            }
        }
        let mut v = len as u64;
        let prefix = &mut self.buf[open.prefix_at..open.prefix_at + needed];
        for (i, b) in prefix.iter_mut().enumerate() {
            *b = (v as u8 & 0x7f) | if i + 1 < needed { 0x80 } else { 0 };
            v >>= 7;
        }
    }
}

/// A field's value as read from a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldValue<'a> {
    /// A varint (integers, bools, enums).
    Varint(u64),
    /// Eight bytes (`fixed64`, `double`).
    Fixed64(u64),
    /// Length-delimited bytes (strings, bytes, nested messages).
    Bytes(&'a [u8]),
    /// Four bytes (`fixed32`, `float`).
    Fixed32(u32),
}

/// The fields of a message, in order: `(field number, value)`; an error names what is
/// malformed. For reading small answers (a collector's), not requests.
pub fn read_fields(mut msg: &[u8]) -> Result<Vec<(u32, FieldValue<'_>)>, String> {
    fn varint(b: &mut &[u8]) -> Result<u64, String> {
        let mut v = 0u64;
        for i in 0..10 {
            let Some((&byte, rest)) = b.split_first() else {
                return Err("the message ends inside a varint".into());
            };
            *b = rest;
            v |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("a varint longer than ten bytes".into())
    }
    fn take<'a>(b: &mut &'a [u8], n: usize) -> Result<&'a [u8], String> {
        if b.len() < n {
            return Err(format!("a field of {n} bytes where {} remain", b.len()));
        }
        let (head, rest) = b.split_at(n);
        *b = rest;
        Ok(head)
    }
    let mut out = Vec::new();
    while !msg.is_empty() {
        let key = varint(&mut msg)?;
        let number = u32::try_from(key >> 3).map_err(|_| format!("field number {}", key >> 3))?;
        let value = match (key & 7) as u32 {
            VARINT => FieldValue::Varint(varint(&mut msg)?),
            FIXED64 => FieldValue::Fixed64(u64::from_le_bytes(
                take(&mut msg, 8)?.try_into().expect("eight bytes"),
            )),
            LEN => {
                let n = usize::try_from(varint(&mut msg)?).map_err(|e| e.to_string())?;
                FieldValue::Bytes(take(&mut msg, n)?)
            }
            FIXED32 => FieldValue::Fixed32(u32::from_le_bytes(
                take(&mut msg, 4)?.try_into().expect("four bytes"),
            )),
            other => {
                return Err(format!(
                    "field {number} has wire type {other}, not read here"
                ))
            }
        };
        out.push((number, value));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes a varint at the start of `b`: (value, bytes read).
    fn read_varint(b: &[u8]) -> (u64, usize) {
        let mut v = 0u64;
        for (i, byte) in b.iter().enumerate() {
            v |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return (v, i + 1);
            }
        }
        panic!("unterminated varint {b:?}")
    }

    #[test]
    fn varints_take_one_byte_per_seven_bits_and_read_back() {
        for (v, len) in [
            (0u64, 1),
            (1, 1),
            (127, 1),
            (128, 2),
            (16_383, 2),
            (16_384, 3),
            (u64::from(u32::MAX), 5),
            (u64::MAX, 10),
        ] {
            assert_eq!(varint_len(v), len, "{v}");
            let mut w = Writer::default();
            w.varint(v);
            assert_eq!(w.len(), len, "{v}");
            assert_eq!(read_varint(w.bytes()), (v, len));
        }
    }

    #[test]
    fn fields_are_written_as_protobufs_reference_encoder_writes_them() {
        // expected bytes from the protobuf encoding guide's own examples
        let mut w = Writer::default();
        w.uint(1, 150);
        assert_eq!(w.bytes(), [0x08, 0x96, 0x01]);
        w.clear();
        w.string(2, "testing");
        assert_eq!(w.bytes(), b"\x12\x07testing");
        w.clear();
        w.int64(3, -1);
        assert_eq!(w.len(), 1 + 10);
        w.clear();
        w.fixed32(16, 0x101);
        // field 16 takes a two-byte key
        assert_eq!(w.bytes(), [0x85, 0x01, 0x01, 0x01, 0x00, 0x00]);
        w.clear();
        w.fixed64(7, 1);
        assert_eq!(w.bytes(), [0x39, 1, 0, 0, 0, 0, 0, 0, 0]);
        w.clear();
        w.string_unless_empty(3, "");
        assert!(w.is_empty());
    }

    #[test]
    fn a_nested_message_gets_the_length_of_what_was_written_in_it_whatever_was_reserved() {
        for body in [0usize, 1, 127, 128, 300, 16_383, 16_384, 70_000] {
            for reserved in [1usize, 2, 3] {
                let mut w = Writer::default();
                w.uint(1, 5);
                let open = w.open_reserving(3, reserved);
                for _ in 0..body {
                    w.raw(&[0xab]);
                }
                w.close(open);
                w.uint(4, 6);
                let b = w.bytes();
                assert_eq!(&b[..3], [0x08, 5, 0x1a], "body {body}, reserved {reserved}");
                let (len, n) = read_varint(&b[3..]);
                assert_eq!(len as usize, body);
                assert_eq!(n, varint_len(body as u64), "minimal length prefix");
                assert!(b[3 + n..3 + n + body].iter().all(|x| *x == 0xab));
                assert_eq!(&b[3 + n + body..], [0x20, 6]);
            }
        }
    }

    #[test]
    fn fields_read_back_as_written_and_malformed_messages_are_errors() {
        let mut w = Writer::default();
        w.uint(1, 300);
        w.fixed64(2, 7);
        w.string(3, "hi");
        w.fixed32(4, 9);
        w.int64(5, -1);
        assert_eq!(
            read_fields(w.bytes()).unwrap(),
            [
                (1, FieldValue::Varint(300)),
                (2, FieldValue::Fixed64(7)),
                (3, FieldValue::Bytes(b"hi")),
                (4, FieldValue::Fixed32(9)),
                (5, FieldValue::Varint(u64::MAX)),
            ]
        );
        assert!(read_fields(&[0x08]).is_err(), "ends inside a varint");
        assert!(read_fields(&[0x1a, 5, b'a']).is_err(), "bytes past the end");
        assert!(read_fields(&[0x0b]).is_err(), "group wire type");
        assert_eq!(read_fields(&[]).unwrap(), []);
    }

    #[test]
    fn messages_nest() {
        let mut w = Writer::default();
        let outer = w.open(1);
        let inner = w.open(2);
        w.string(1, &"x".repeat(200));
        w.close(inner);
        w.close(outer);
        let b = w.bytes();
        // outer: key, length of (inner key + 2-byte length + 203)
        assert_eq!(b[0], 0x0a);
        let (outer_len, n) = read_varint(&b[1..]);
        assert_eq!(outer_len as usize, b.len() - 1 - n);
        assert_eq!(b[1 + n], 0x12);
        let (inner_len, m) = read_varint(&b[2 + n..]);
        assert_eq!(inner_len, 203);
        assert_eq!(outer_len as usize, 1 + m + 203);
    }
}
