use std::fmt;

/// A framing-level protocol violation. After any of these the connection must be failed
/// (RFC 6455 §7.1.7); [`WsError::close_code`] gives the code to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WsError {
    /// RSV1/2/3 set without a negotiated extension.
    ReservedBits,
    /// Opcode 3–7 or 0xB–0xF.
    ReservedOpcode(u8),
    /// A control frame with FIN clear.
    FragmentedControl,
    /// A control frame with payload > 125 bytes.
    ControlTooLong(u64),
    /// 64-bit length with the most significant bit set.
    LengthMsbSet,
    /// Payload length above the configured cap.
    TooLarge { len: u64, max: u64 },
    /// Server side got an unmasked frame.
    Unmasked,
    /// Client side got a masked frame.
    Masked,
    /// Continuation frame with no message in progress.
    UnexpectedContinuation,
    /// New text/binary frame while a fragmented message is in progress.
    ExpectedContinuation,
    /// Close payload of length 1, or a code that may not appear on the wire.
    InvalidCloseCode,
    /// Close reason not UTF-8.
    InvalidCloseReason,
    /// Bytes received after a Close frame.
    AfterClose,
}

impl WsError {
    /// Close status to send when failing the connection because of this error.
    pub fn close_code(self) -> u16 {
        match self {
            WsError::TooLarge { .. } => 1009,
            WsError::InvalidCloseReason => 1007,
            _ => 1002,
        }
    }
}

impl fmt::Display for WsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WsError::ReservedBits => f.write_str("reserved bits set"),
            WsError::ReservedOpcode(op) => write!(f, "reserved opcode {op:#x}"),
            WsError::FragmentedControl => f.write_str("fragmented control frame"),
            WsError::ControlTooLong(n) => write!(f, "control frame payload of {n} bytes"),
            WsError::LengthMsbSet => f.write_str("64-bit length with MSB set"),
            WsError::TooLarge { len, max } => write!(f, "frame of {len} bytes exceeds {max}"),
            WsError::Unmasked => f.write_str("unmasked frame from client"),
            WsError::Masked => f.write_str("masked frame from server"),
            WsError::UnexpectedContinuation => f.write_str("continuation without a message"),
            WsError::ExpectedContinuation => f.write_str("new message inside a fragmented one"),
            WsError::InvalidCloseCode => f.write_str("invalid close code"),
            WsError::InvalidCloseReason => f.write_str("close reason is not UTF-8"),
            WsError::AfterClose => f.write_str("data after close frame"),
        }
    }
}

impl std::error::Error for WsError {}
