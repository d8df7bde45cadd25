use std::fmt;

/// What can go wrong configuring a KCP session (never raised for network data).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KcpError {
    /// A `--crypt` name kcptun does not know.
    UnknownCrypt(String),
    /// A `--mode` name kcptun does not know.
    UnknownMode(String),
    /// A configuration value out of its valid range.
    InvalidConfig(&'static str),
}

impl fmt::Display for KcpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KcpError::UnknownCrypt(n) => write!(
                f,
                "unknown kcp crypt {n:?} (none, aes, aes-128, aes-192, salsa20, xor, tea, xtea, blowfish, twofish, cast5, 3des, sm4)"
            ),
            KcpError::UnknownMode(n) => {
                write!(
                    f,
                    "unknown kcp mode {n:?} (normal, fast, fast2, fast3, manual)"
                )
            }
            KcpError::InvalidConfig(why) => write!(f, "invalid kcp config: {why}"),
        }
    }
}

impl std::error::Error for KcpError {}
