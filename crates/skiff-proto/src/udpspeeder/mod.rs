//! UDPspeeder v2 (speederv2) as a Skiff protocol: the codec is `skiff_udpfec`; here are its
//! async edges. `server` is the inbound (FEC datagrams in, each conversation routed to the
//! fixed target, like `speederv2 -s`), `client` the outbound (each routed UDP session one
//! conversation in a shared tunnel to the server, like `speederv2 -c`).

pub mod client;
pub mod server;

use std::sync::Mutex;
use std::time::Instant;

use skiff_udpfec::{CookOptions, FecParams, FecSession};
use tokio::sync::Notify;

/// Socket buffers both ways, speederv2's `--sock-buf` default (1024 KiB): a FEC group leaves
/// in one burst, which the kernel's default buffer can drop under load.
const SOCKET_BUFFER: usize = 1 << 20;

fn size_buffers(socket: &tokio::net::UdpSocket) {
    let sock = socket2::SockRef::from(socket);
    let _ = sock.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = sock.set_send_buffer_size(SOCKET_BUFFER);
}

/// What both ends are configured with (speederv2's flags).
#[derive(Clone, Debug)]
pub struct UdpspeederConfig {
    pub params: FecParams,
    pub cook: CookOptions,
    /// Shards one peer's decoder holds at most (`--decode-buf`).
    pub decode_buf: usize,
}

impl UdpspeederConfig {
    fn session(&self) -> FecSession {
        FecSession::new(self.params.clone(), self.cook.clone(), self.decode_buf)
    }
}

/// One peer's FEC session with the wake-up of its flush timer.
struct SharedSession {
    session: Mutex<FecSession>,
    /// Signalled when a send opens a group, so the flusher starts its timer.
    group_opened: Notify,
}

impl SharedSession {
    fn new(config: &UdpspeederConfig) -> Self {
        SharedSession {
            session: Mutex::new(config.session()),
            group_opened: Notify::new(),
        }
    }

    /// Encodes one conversation packet; returns the datagrams to send now.
    fn send(&self, conv: u32, payload: &[u8]) -> Result<Vec<Vec<u8>>, skiff_udpfec::Error> {
        let mut out = Vec::new();
        let Ok(mut session) = self.session.lock() else {
            return Ok(out);
        };
        let had_group = session.deadline().is_some();
        let result = session.send(conv, payload, Instant::now(), &mut out);
        if !had_group && session.deadline().is_some() {
            self.group_opened.notify_one();
        }
        result.map(|()| out)
    }

    /// Waits for the open group's timeout and returns its datagrams (empty if none is due).
    async fn next_flush(&self) -> Vec<Vec<u8>> {
        let deadline = self.session.lock().ok().and_then(|s| s.deadline());
        match deadline {
            None => {
                self.group_opened.notified().await;
                Vec::new()
            }
            Some(at) => {
                tokio::time::sleep_until(at.into()).await;
                let mut out = Vec::new();
                if let Ok(mut session) = self.session.lock()
                    && session.deadline().is_some_and(|d| d <= Instant::now())
                {
                    session.flush(&mut out);
                }
                out
            }
        }
    }
}
