//! smux (xtaci/smux 1.5.16), the stream multiplexer kcptun runs over one KCP conversation:
//! [`frame`] is the wire format, [`session`] the sans-IO state machine.

pub mod frame;
pub mod session;

pub use frame::{Cmd, Header, SmuxError};
pub use session::{Session, SmuxConfig, StreamRead, StreamWrite};
