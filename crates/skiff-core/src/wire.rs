//! What every sans-IO parser shares: a bounds-checked reader over a byte slice, and the
//! "complete or need more bytes" answer of a parser fed a prefix of its input. One of each,
//! so that the protocols do not carry copies of their own.

/// The result of parsing a prefix of the input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed<T> {
    /// A whole message (for headers: the value and the header length in bytes).
    Complete(T),
    /// The input is a valid beginning of a message; more bytes are needed.
    Incomplete,
}

impl<T> Parsed<T> {
    /// The complete value, or None when incomplete.
    pub fn complete(self) -> Option<T> {
        match self {
            Parsed::Complete(value) => Some(value),
            Parsed::Incomplete => None,
        }
    }

    /// Transforms the value of a complete message.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Parsed<U> {
        match self {
            Parsed::Complete(value) => Parsed::Complete(f(value)),
            Parsed::Incomplete => Parsed::Incomplete,
        }
    }
}

/// Reads big-endian fields from the front of a slice; a read past the end is None and moves
/// nothing, so a caller can tell "need more bytes" from a bad value.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    /// Bytes read so far.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// What has not been read yet.
    pub fn rest(&self) -> &'a [u8] {
        self.buf.get(self.pos..).unwrap_or(&[])
    }

    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let bytes = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(bytes)
    }

    pub fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N).and_then(|b| b.try_into().ok())
    }

    pub fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    pub fn u16(&mut self) -> Option<u16> {
        self.array().map(u16::from_be_bytes)
    }

    pub fn u32(&mut self) -> Option<u32> {
        self.array().map(u32::from_be_bytes)
    }

    pub fn u64(&mut self) -> Option<u64> {
        self.array().map(u64::from_be_bytes)
    }

    /// A field preceded by its one-byte length.
    pub fn vec8(&mut self) -> Option<&'a [u8]> {
        let save = self.pos;
        let n = self.u8()?;
        self.take(usize::from(n)).or_else(|| {
            self.pos = save;
            None
        })
    }

    /// A field preceded by its two-byte length.
    pub fn vec16(&mut self) -> Option<&'a [u8]> {
        let save = self.pos;
        let n = self.u16()?;
        self.take(usize::from(n)).or_else(|| {
            self.pos = save;
            None
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fields_and_the_end() {
        let mut r = Reader::new(&[1, 0, 2, 0, 0, 0, 3, 2, 9, 9, 7]);
        assert_eq!(r.u8(), Some(1));
        assert_eq!(r.u16(), Some(2));
        assert_eq!(r.u32(), Some(3));
        assert_eq!(r.vec8(), Some(&[9, 9][..]));
        assert_eq!(r.pos(), 10);
        assert_eq!(r.u16(), None, "one byte left");
        assert_eq!(r.rest(), &[7]);
        assert_eq!(r.vec8(), None, "a length past the end moves nothing");
        assert_eq!(r.rest(), &[7]);
    }

    proptest! {
        #[test]
        fn reads_never_pass_the_end(buf in proptest::collection::vec(any::<u8>(), 0..64),
                                    ops in proptest::collection::vec(0u8..7, 0..32),
                                    n in 0usize..80) {
            let mut r = Reader::new(&buf);
            for op in ops {
                let before = r.pos();
                let moved = match op {
                    0 => r.u8().is_some(),
                    1 => r.u16().is_some(),
                    2 => r.u32().is_some(),
                    3 => r.u64().is_some(),
                    4 => r.take(n).is_some(),
                    5 => r.vec8().is_some(),
                    _ => r.vec16().is_some(),
                };
                prop_assert!(r.pos() <= buf.len());
                if !moved {
                    prop_assert_eq!(r.pos(), before);
                }
                prop_assert_eq!(r.rest(), &buf[r.pos()..]);
            }
        }
    }
}
