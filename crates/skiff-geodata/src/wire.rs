//! The protobuf wire format, only as far as the .dat files need it: varints, field keys and
//! length-delimited payloads. Every read is bounds-checked; bad input is an error, never a
//! panic.

use std::fmt;

/// Why bytes are not a valid protobuf message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WireError {
    /// The input ends inside a varint or a payload.
    Truncated,
    /// A varint longer than 10 bytes or over 64 bits.
    VarintOverflow,
    /// Wire types 3/4 (groups) and 6/7 do not occur in these files.
    BadWireType(u8),
    /// Field number 0.
    BadField,
    /// A field has the right number and the wrong wire type or content.
    BadValue(&'static str),
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Truncated => f.write_str("truncated protobuf data"),
            WireError::VarintOverflow => f.write_str("varint longer than 64 bits"),
            WireError::BadWireType(t) => write!(f, "unsupported protobuf wire type {t}"),
            WireError::BadField => f.write_str("protobuf field number 0"),
            WireError::BadValue(what) => write!(f, "invalid {what}"),
        }
    }
}

impl std::error::Error for WireError {}

/// One field's payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32(u32),
}

/// Reads a varint from the front of `buf`, returning it and the bytes after it.
pub fn varint(buf: &[u8]) -> Result<(u64, &[u8]), WireError> {
    let mut value = 0u64;
    for (i, &b) in buf.iter().enumerate().take(10) {
        let bits = u64::from(b & 0x7f);
        if i == 9 && b > 1 {
            return Err(WireError::VarintOverflow);
        }
        value |= bits << (7 * i);
        if b & 0x80 == 0 {
            return Ok((value, &buf[i + 1..]));
        }
    }
    if buf.len() >= 10 {
        Err(WireError::VarintOverflow)
    } else {
        Err(WireError::Truncated)
    }
}

/// Iterates over the fields of one message. After an error it yields nothing more.
pub struct Fields<'a> {
    rest: &'a [u8],
    failed: bool,
}

impl<'a> Fields<'a> {
    pub fn new(message: &'a [u8]) -> Fields<'a> {
        Fields {
            rest: message,
            failed: false,
        }
    }

    /// The bytes not read yet (what follows the last field returned).
    pub fn rest(&self) -> &'a [u8] {
        self.rest
    }

    fn read(&mut self) -> Result<(u32, Value<'a>), WireError> {
        let (key, rest) = varint(self.rest)?;
        let field = u32::try_from(key >> 3).map_err(|_| WireError::BadField)?;
        if field == 0 {
            return Err(WireError::BadField);
        }
        let (value, rest) = match key & 7 {
            0 => {
                let (v, rest) = varint(rest)?;
                (Value::Varint(v), rest)
            }
            1 => {
                let (bytes, rest) = split(rest, 8)?;
                let mut b = [0u8; 8];
                b.copy_from_slice(bytes);
                (Value::Fixed64(u64::from_le_bytes(b)), rest)
            }
            2 => {
                let (len, rest) = varint(rest)?;
                let len = usize::try_from(len).map_err(|_| WireError::Truncated)?;
                let (bytes, rest) = split(rest, len)?;
                (Value::Bytes(bytes), rest)
            }
            5 => {
                let (bytes, rest) = split(rest, 4)?;
                let mut b = [0u8; 4];
                b.copy_from_slice(bytes);
                (Value::Fixed32(u32::from_le_bytes(b)), rest)
            }
            other => return Err(WireError::BadWireType(other as u8)),
        };
        self.rest = rest;
        Ok((field, value))
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Value<'a>), WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.rest.is_empty() {
            return None;
        }
        let r = self.read();
        self.failed = r.is_err();
        Some(r)
    }
}

fn split(buf: &[u8], len: usize) -> Result<(&[u8], &[u8]), WireError> {
    if buf.len() < len {
        Err(WireError::Truncated)
    } else {
        Ok(buf.split_at(len))
    }
}

/// A length-delimited field's bytes, or an error naming `what` for any other wire type.
pub fn bytes<'a>(value: Value<'a>, what: &'static str) -> Result<&'a [u8], WireError> {
    match value {
        Value::Bytes(b) => Ok(b),
        _ => Err(WireError::BadValue(what)),
    }
}

/// A length-delimited field holding UTF-8 text.
pub fn text<'a>(value: Value<'a>, what: &'static str) -> Result<&'a str, WireError> {
    std::str::from_utf8(bytes(value, what)?).map_err(|_| WireError::BadValue(what))
}

/// A varint field.
pub fn number(value: Value<'_>, what: &'static str) -> Result<u64, WireError> {
    match value {
        Value::Varint(v) => Ok(v),
        _ => Err(WireError::BadValue(what)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints() {
        assert_eq!(varint(&[0x00]), Ok((0, &[][..])));
        assert_eq!(varint(&[0xac, 0x02, 9]), Ok((300, &[9][..])));
        assert_eq!(varint(&[0x80]), Err(WireError::Truncated));
        assert_eq!(varint(&[0xff; 11]), Err(WireError::VarintOverflow));
        let max = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(varint(&max), Ok((u64::MAX, &[][..])));
        let over = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert_eq!(varint(&over), Err(WireError::VarintOverflow));
    }

    #[test]
    fn fields_and_errors() {
        // field 1 varint 150, field 2 bytes "hi", field 3 fixed32, field 4 fixed64
        let msg = [
            0x08, 0x96, 0x01, 0x12, 2, b'h', b'i', 0x1d, 1, 0, 0, 0, 0x21, 2, 0, 0, 0, 0, 0, 0, 0,
        ];
        let fields: Vec<_> = Fields::new(&msg).collect::<Result<_, _>>().unwrap();
        assert_eq!(
            fields,
            [
                (1, Value::Varint(150)),
                (2, Value::Bytes(b"hi")),
                (3, Value::Fixed32(1)),
                (4, Value::Fixed64(2)),
            ]
        );
        let errs = |m: &[u8]| Fields::new(m).find_map(Result::err);
        assert_eq!(errs(&[0x12, 5, b'a']), Some(WireError::Truncated));
        assert_eq!(errs(&[0x0b]), Some(WireError::BadWireType(3)));
        assert_eq!(errs(&[0x00, 0x00]), Some(WireError::BadField));
        // After an error, nothing more.
        assert_eq!(Fields::new(&[0x0b, 0x08, 0x01]).count(), 1);
    }
}
