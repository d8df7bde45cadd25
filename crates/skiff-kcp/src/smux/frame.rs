//! smux (xtaci/smux 1.5.16) frame header, spec/kcp.md §8:
//! `version(1) | cmd(1) | length(2, LE) | stream id(4, LE) | data(length)`.

use std::fmt;

pub const HEADER_LEN: usize = 8;
/// `UPD` payload: consumed(4, LE) | window(4, LE).
pub const UPD_LEN: usize = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmd {
    /// Open a stream.
    Syn = 0,
    /// End of the sender's data on a stream.
    Fin = 1,
    /// Stream data.
    Psh = 2,
    /// Keepalive (stream id 0).
    Nop = 3,
    /// v2 flow control: the receiver's consumed count and window.
    Upd = 4,
}

impl Cmd {
    pub fn from_byte(b: u8) -> Option<Cmd> {
        Some(match b {
            0 => Cmd::Syn,
            1 => Cmd::Fin,
            2 => Cmd::Psh,
            3 => Cmd::Nop,
            4 => Cmd::Upd,
            _ => return None,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub version: u8,
    pub cmd: Cmd,
    pub length: u16,
    pub sid: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SmuxError {
    /// The version byte differs from ours (smux: `ErrInvalidProtocol`).
    Version(u8),
    /// A command byte smux does not know.
    Command(u8),
    /// An `UPD` frame whose length is not 8.
    UpdateLength(u16),
    /// Nothing received within the keepalive timeout.
    KeepaliveTimeout,
    /// Stream ids are exhausted (2^32 opens on one session).
    StreamIdsExhausted,
    /// The session is closed.
    Closed,
}

impl fmt::Display for SmuxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SmuxError::Version(v) => write!(f, "smux frame with version {v}"),
            SmuxError::Command(c) => write!(f, "smux frame with unknown command {c}"),
            SmuxError::UpdateLength(n) => write!(f, "smux UPD frame of {n} bytes"),
            SmuxError::KeepaliveTimeout => write!(f, "smux keepalive timeout"),
            SmuxError::StreamIdsExhausted => write!(f, "smux stream ids exhausted"),
            SmuxError::Closed => write!(f, "smux session closed"),
        }
    }
}

impl std::error::Error for SmuxError {}

impl Header {
    pub fn new(version: u8, cmd: Cmd, length: u16, sid: u32) -> Header {
        Header {
            version,
            cmd,
            length,
            sid,
        }
    }

    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let l = self.length.to_le_bytes();
        let s = self.sid.to_le_bytes();
        [
            self.version,
            self.cmd as u8,
            l[0],
            l[1],
            s[0],
            s[1],
            s[2],
            s[3],
        ]
    }

    /// Parses a header, checking the version against `version` (smux refuses any other).
    pub fn decode(b: &[u8; HEADER_LEN], version: u8) -> Result<Header, SmuxError> {
        if b[0] != version {
            return Err(SmuxError::Version(b[0]));
        }
        let cmd = Cmd::from_byte(b[1]).ok_or(SmuxError::Command(b[1]))?;
        Ok(Header {
            version: b[0],
            cmd,
            length: u16::from_le_bytes([b[2], b[3]]),
            sid: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
        })
    }
}

/// Appends one frame to `out`.
pub fn put_frame(out: &mut Vec<u8>, version: u8, cmd: Cmd, sid: u32, data: &[u8]) {
    let length = u16::try_from(data.len()).unwrap_or(u16::MAX);
    out.extend_from_slice(&Header::new(version, cmd, length, sid).encode());
    out.extend_from_slice(&data[..usize::from(length)]);
}

/// Appends a v2 `UPD` frame to `out`.
pub fn put_update(out: &mut Vec<u8>, version: u8, sid: u32, consumed: u32, window: u32) {
    let mut data = [0u8; UPD_LEN];
    data[..4].copy_from_slice(&consumed.to_le_bytes());
    data[4..].copy_from_slice(&window.to_le_bytes());
    put_frame(out, version, Cmd::Upd, sid, &data);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_frames_from_the_spec() {
        let mut out = Vec::new();
        put_frame(&mut out, 1, Cmd::Syn, 3, &[]);
        assert_eq!(out, [0x01, 0x00, 0x00, 0x00, 0x03, 0, 0, 0]);
        out.clear();
        put_frame(&mut out, 1, Cmd::Psh, 3, b"hello");
        assert_eq!(out, b"\x01\x02\x05\x00\x03\x00\x00\x00hello");
        out.clear();
        put_update(&mut out, 2, 3, 12, 2_097_152);
        assert_eq!(out, [2, 4, 8, 0, 3, 0, 0, 0, 0x0c, 0, 0, 0, 0, 0, 0x20, 0]);
        let h = Header::decode(&[0x02, 0x00, 0, 0, 3, 0, 0, 0], 2).unwrap();
        assert_eq!(h, Header::new(2, Cmd::Syn, 0, 3));
        assert_eq!(
            Header::decode(&[0x02, 0x00, 0, 0, 3, 0, 0, 0], 1),
            Err(SmuxError::Version(2))
        );
        assert_eq!(
            Header::decode(&[0x01, 0x05, 0, 0, 3, 0, 0, 0], 1),
            Err(SmuxError::Command(5))
        );
    }
}
