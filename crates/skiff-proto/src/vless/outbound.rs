//! The VLESS outbound: reach the server through the [`Dialer`] it holds (transport layers,
//! and any chained outbound, are the dialer's business), then speak VLESS inside.
//!
//! UDP (`bind`) uses command 0x02 (vless.md §4.2): one VLESS connection carries the datagrams
//! of one destination, as length-prefixed packets; [`skiff_core::udp_links`] keeps one such
//! connection per destination.

use std::io;
use std::sync::Arc;

use skiff_core::datagram::{BoxDatagramRecv, BoxDatagramSend};
use skiff_core::udp_links::{self, LinkOpener};
use skiff_core::{Address, BoxFuture, BoxPacketConn, BoxStream, Dialer, Metadata, Outbound};

use super::client;
use super::codec::Command;
use super::packet::VlessPacketStream;
use crate::user_id::UserId;

/// The flow an outbound user asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Flow {
    /// Plain VLESS.
    #[default]
    None,
    /// XTLS Vision (`xtls-rprx-vision`).
    Vision,
    /// Vision, and UDP to port 443 is carried too (`xtls-rprx-vision-udp443`; the wire says
    /// `xtls-rprx-vision`).
    VisionUdp443,
}

impl Flow {
    pub fn is_vision(self) -> bool {
        self != Flow::None
    }
}

pub struct VlessOutbound {
    pub server: Address,
    pub user: UserId,
    pub flow: Flow,
    /// How to reach the server (its layers, directly or through a chained outbound).
    pub dialer: Arc<dyn Dialer>,
}

impl Outbound for VlessOutbound {
    fn connect<'a>(
        &'a self,
        meta: &'a Metadata,
        destination: &'a Address,
    ) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            let stream = self.dialer.dial(&self.server, meta).await?;
            if self.flow.is_vision() {
                return client::connect_vision(stream, &self.user, destination);
            }
            // An outbound's mux pool asks for `v1.mux.cool`: VLESS says it with its command.
            let command = if crate::mux::is_mux_cool(destination) {
                Command::Mux
            } else {
                Command::Tcp
            };
            Ok(client::connect(stream, &self.user, destination, command))
        })
    }

    fn bind<'a>(&'a self, meta: &'a Metadata) -> BoxFuture<'a, io::Result<BoxPacketConn>> {
        Box::pin(async move {
            let opener = Arc::new(Links {
                server: self.server.clone(),
                user: self.user,
                flow: self.flow,
                dialer: self.dialer.clone(),
                meta: meta.clone(),
            });
            Ok(udp_links::packet_conn(opener))
        })
    }
}

/// What opening a VLESS UDP connection needs, owned: links open after `bind` returned.
struct Links {
    server: Address,
    user: UserId,
    flow: Flow,
    dialer: Arc<dyn Dialer>,
    meta: Metadata,
}

impl LinkOpener for Links {
    /// A VLESS UDP stream to `destination`; the request header leaves with the first datagram.
    fn open<'a>(
        &'a self,
        destination: &'a Address,
    ) -> BoxFuture<'a, io::Result<(BoxDatagramRecv, BoxDatagramSend)>> {
        Box::pin(async move {
            // Xray's Vision client keeps UDP/443 (QUIC) off the tunnel unless the flow says
            // `-udp443`, so browsers fall back to TCP, where Vision can do its work.
            if self.flow == Flow::Vision && destination.port() == 443 {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    "XTLS Vision refuses UDP to port 443 (use flow xtls-rprx-vision-udp443 to allow it)",
                ));
            }
            let stream = self.dialer.dial(&self.server, &self.meta).await?;
            let packets = VlessPacketStream::new(client::connect(
                stream,
                &self.user,
                destination,
                Command::Udp,
            ));
            let (reader, writer) = packets.into_split();
            Ok((
                Box::new(reader) as BoxDatagramRecv,
                Box::new(writer) as BoxDatagramSend,
            ))
        })
    }

    fn server(&self) -> &Address {
        &self.server
    }

    fn protocol(&self) -> &'static str {
        "VLESS"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_dialer::TcpDialer;
    use crate::vless::server::{VlessAccept, VlessServer, VlessUser, accept};
    use skiff_core::udp_links::{MAX_LINKS, REDIAL_PAUSE};
    use std::future::poll_fn;
    use std::net::SocketAddr;
    use std::time::Duration;
    use tokio::io::ReadBuf;
    use tokio::net::TcpListener;
    use tokio::sync::mpsc;

    const ID: [u8; 16] = [7; 16];

    /// A VLESS server that echoes every UDP packet back on its connection (closing it cleanly
    /// after `close_after` packets, if given) and reports each connection's destination port
    /// when it opens and again, negated, when it closes.
    async fn echo_server(close_after: Option<usize>) -> (SocketAddr, mpsc::UnboundedReceiver<i32>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (events, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let server = Arc::new(VlessServer::new(vec![VlessUser {
                id: UserId::from_bytes(ID),
                email: None,
                vision: false,
            }]));
            loop {
                let (tcp, _) = listener.accept().await.unwrap();
                let server = server.clone();
                let events = events.clone();
                tokio::spawn(async move {
                    let Ok(VlessAccept::Udp {
                        destination,
                        stream,
                        ..
                    }) = accept(tcp, &server).await
                    else {
                        panic!("not a VLESS UDP request");
                    };
                    let port = i32::from(destination.port());
                    events.send(port).unwrap();
                    let (mut rx, mut tx) = VlessPacketStream::new(stream).into_split();
                    let mut echoed = 0;
                    while let Ok(Some(packet)) = rx.recv_packet().await {
                        if tx.send(&packet).await.is_err() {
                            break;
                        }
                        echoed += 1;
                        if close_after == Some(echoed) {
                            let _ = tx.shutdown().await;
                            break;
                        }
                    }
                    events.send(-port).unwrap();
                });
            }
        });
        (addr, rx)
    }

    fn outbound(server: SocketAddr) -> VlessOutbound {
        VlessOutbound {
            server: Address::Ip(server),
            user: UserId::from_bytes(ID),
            flow: Flow::None,
            dialer: Arc::new(TcpDialer),
        }
    }

    fn meta() -> Metadata {
        let any = SocketAddr::from(([127, 0, 0, 1], 1));
        Metadata::new(Arc::from("test"), any, any)
    }

    async fn recv(conn: &BoxPacketConn) -> (Address, Vec<u8>) {
        let mut buf = [0u8; 64];
        let mut read = ReadBuf::new(&mut buf);
        let from = poll_fn(|cx| conn.poll_recv_from(cx, &mut read))
            .await
            .unwrap();
        (from, read.filled().to_vec())
    }

    #[tokio::test]
    async fn one_connection_per_destination_bounded_and_closed_on_drop() {
        tokio::time::timeout(Duration::from_secs(30), async {
            let (server, mut events) = echo_server(None).await;
            let conn = outbound(server).bind(&meta()).await.unwrap();
            let destinations: Vec<Address> = (0..MAX_LINKS as u16 + 4)
                .map(|i| Address::from_host("example.com", 1000 + i))
                .collect();
            // Twice round all destinations: each answers from its own connection.
            for round in 0..2u8 {
                for destination in &destinations {
                    let payload = [round, destination.port() as u8];
                    conn.send_to(&payload, destination).await.unwrap();
                    let (from, got) = recv(&conn).await;
                    assert_eq!((&from, &got[..]), (destination, &payload[..]));
                }
            }
            // Each visit past the bound opened a connection and closed the least recently
            // used one (the server reports closes a little later), so exactly MAX_LINKS stay
            // open after 2 × 20 openings.
            let (mut open, mut opened) = (0i32, 0usize);
            while opened < 2 * destinations.len() || open != MAX_LINKS as i32 {
                let event = events.recv().await.unwrap();
                open += event.signum();
                opened += usize::from(event > 0);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert!(events.try_recv().is_err(), "more connections than visits");
            drop(conn);
            for _ in 0..MAX_LINKS {
                assert!(events.recv().await.unwrap() < 0);
            }
        })
        .await
        .unwrap();
    }

    #[tokio::test]
    async fn a_failed_connection_pauses_then_reopens() {
        tokio::time::timeout(Duration::from_secs(30), async {
            // The server takes the request and closes without answering.
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let conn = outbound(listener.local_addr().unwrap())
                .bind(&meta())
                .await
                .unwrap();
            let destination = Address::from_host("example.com", 53);
            conn.send_to(b"one", &destination).await.unwrap();
            let (tcp, _) = listener.accept().await.unwrap();
            drop(tcp);
            // The failed link refuses datagrams for a while instead of redialling.
            let mut refused = false;
            for _ in 0..50 {
                tokio::time::sleep(Duration::from_millis(10)).await;
                if conn.send_to(b"two", &destination).await.is_err() {
                    refused = true;
                    break;
                }
            }
            assert!(refused, "a failed link keeps taking datagrams");
            // After the pause the next datagram dials again.
            tokio::time::sleep(REDIAL_PAUSE + Duration::from_millis(100)).await;
            conn.send_to(b"three", &destination).await.unwrap();
            let (_tcp, _) = listener.accept().await.unwrap();
        })
        .await
        .unwrap();
    }

    #[tokio::test]
    async fn a_server_close_between_packets_reopens() {
        tokio::time::timeout(Duration::from_secs(30), async {
            // The server closes each connection cleanly after one packet (as an idle close).
            let (server, mut events) = echo_server(Some(1)).await;
            let conn = outbound(server).bind(&meta()).await.unwrap();
            let destination = Address::from_host("example.com", 53);
            for payload in [&b"one"[..], b"two", b"three"] {
                // A datagram racing the close is lost, as on any UDP path: resend until
                // the link has seen the end (no redial pause follows a clean end).
                let mut echoed = None;
                for _ in 0..20 {
                    conn.send_to(payload, &destination).await.unwrap();
                    if let Ok((_, got)) =
                        tokio::time::timeout(Duration::from_secs(1), recv(&conn)).await
                    {
                        echoed = Some(got);
                        break;
                    }
                }
                assert_eq!(echoed.as_deref(), Some(payload));
                assert_eq!(events.recv().await, Some(53));
                assert_eq!(events.recv().await, Some(-53));
            }
        })
        .await
        .unwrap();
    }
}
