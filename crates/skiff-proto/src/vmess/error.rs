//! Why a VMess header or chunk was refused (or could not be encoded).

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VmessError {
    /// The auth ID matches no configured user (or its timestamp is out of the window, or it
    /// was seen before: a prober must not learn which).
    InvalidUser,
    /// The sealed header length or header failed authentication.
    HeaderAuth,
    /// The header announces more bytes than any valid header has.
    HeaderTooLong(usize),
    /// The instruction header ends before its fields do.
    Truncated,
    /// The FNV-1a checksum of the instruction header does not match.
    BadChecksum,
    /// The same (user, body key, body IV) was used within the session-history window.
    ReplayedSession,
    /// A command byte other than 1 (TCP), 2 (UDP), 3 (Mux).
    UnknownCommand(u8),
    /// An address type other than 1 (IPv4), 2 (domain), 3 (IPv6).
    BadAddressType(u8),
    /// A domain that is empty, too long or has characters outside `[0-9A-Za-z-._]`.
    BadDomain,
    /// A security nibble that is not AES-128-GCM (3), ChaCha20-Poly1305 (4) or none (5).
    UnsupportedSecurity(u8),
    /// An option combination the body codec cannot honour.
    BadOptions(&'static str),
    /// TCP/UDP request without a destination, or Mux with one (encoding only).
    BadDestination,
    /// The response header failed authentication.
    ResponseAuth,
    /// The response header does not echo the request's auth byte V.
    ResponseMismatch { expected: u8, got: u8 },
    /// A body chunk failed authentication.
    ChunkAuth,
    /// A body chunk's length is impossible (shorter than its tag and padding).
    ChunkLength(usize),
}

impl fmt::Display for VmessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VmessError::InvalidUser => {
                f.write_str("invalid VMess user (unknown, expired or replayed auth ID)")
            }
            VmessError::HeaderAuth => f.write_str("VMess request header failed authentication"),
            VmessError::HeaderTooLong(n) => {
                write!(f, "VMess request header of {n} bytes is too long")
            }
            VmessError::Truncated => f.write_str("VMess instruction header is truncated"),
            VmessError::BadChecksum => f.write_str("VMess instruction header checksum mismatch"),
            VmessError::ReplayedSession => {
                f.write_str("duplicated VMess session key and IV, possibly a replay")
            }
            VmessError::UnknownCommand(c) => write!(f, "unknown VMess command {c:#04x}"),
            VmessError::BadAddressType(t) => write!(f, "unknown VMess address type {t:#04x}"),
            VmessError::BadDomain => f.write_str("invalid domain name in VMess request"),
            VmessError::UnsupportedSecurity(s) => write!(
                f,
                "VMess security {s:#04x} is not supported (aes-128-gcm, chacha20-poly1305 or none)"
            ),
            VmessError::BadOptions(why) => write!(f, "invalid VMess options: {why}"),
            VmessError::BadDestination => {
                f.write_str("VMess TCP/UDP requests need a destination, Mux requests none")
            }
            VmessError::ResponseAuth => f.write_str("VMess response header failed authentication"),
            VmessError::ResponseMismatch { expected, got } => write!(
                f,
                "unexpected VMess response header: expected {expected:#04x}, got {got:#04x}"
            ),
            VmessError::ChunkAuth => f.write_str("VMess chunk failed authentication"),
            VmessError::ChunkLength(n) => write!(f, "invalid VMess chunk length {n}"),
        }
    }
}

impl std::error::Error for VmessError {}

impl From<VmessError> for std::io::Error {
    fn from(error: VmessError) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::InvalidData, error)
    }
}
