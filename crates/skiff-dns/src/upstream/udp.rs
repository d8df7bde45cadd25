//! Classic DNS over UDP: one socket per query, connected to the server so the kernel drops
//! datagrams from anyone else.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::UdpSocket;
use tokio::time::Instant;

use crate::error::DnsError;
use crate::message::{Answer, MAX_MESSAGE, Question, Reply};

/// At most this many datagrams are read for one query, whatever arrives (wrong ids are
/// dropped and counted): a flood cannot keep a query busy until its timeout.
const MAX_DATAGRAMS: u32 = 32;

pub enum UdpOutcome {
    Answer(Answer),
    /// The TC bit: the caller asks again over TCP.
    Truncated,
}

pub async fn exchange(
    server: SocketAddr,
    question: &Question,
    query: &[u8],
    id: u16,
    timeout: Duration,
) -> Result<UdpOutcome, DnsError> {
    let deadline = Instant::now() + timeout;
    let bind: SocketAddr = if server.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        ([0u16; 8], 0).into()
    };
    let socket = UdpSocket::bind(bind).await?;
    socket.connect(server).await?;
    socket.send(query).await?;
    // One byte more than a message may hold: a datagram filling it is oversize.
    let mut buf = vec![0u8; MAX_MESSAGE + 1];
    let mut wrong_ids = 0;
    for _ in 0..MAX_DATAGRAMS {
        let len = match tokio::time::timeout_at(deadline, socket.recv(&mut buf)).await {
            Ok(result) => result?,
            Err(_) => break,
        };
        match question.decode(id, &buf[..len]) {
            Ok(Reply::Answer(answer)) => return Ok(UdpOutcome::Answer(answer)),
            Ok(Reply::Truncated) => return Ok(UdpOutcome::Truncated),
            Err(DnsError::WrongId { .. }) => wrong_ids += 1,
            Err(e) => return Err(e),
        }
    }
    Err(DnsError::Timeout {
        after: timeout,
        wrong_ids,
    })
}
