//! The `freedom` outbound: connect to the destination through its dialer (the plain TCP
//! dial, or a chained outbound), resolving domains the way its `domainStrategy` says.

use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::task::{Context, Poll};

use skiff_core::{
    Address, BoxFuture, BoxPacketConn, BoxStream, Dialer, Family, Metadata, Outbound, PacketConn,
};
use tokio::io::ReadBuf;
use tokio::net::UdpSocket;

/// Which addresses of a domain freedom may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolve {
    /// Let the system resolver pick (Xray's AsIs).
    AsIs,
    /// Any family (UseIP).
    Any,
    V4,
    V6,
}

pub struct Freedom {
    pub resolve: Resolve,
    /// Send every connection here instead; port 0 keeps the original port, an empty host
    /// keeps the original host.
    pub redirect: Option<(String, u16)>,
    /// How streams leave: the plain TCP dial (tuned as `sockopt` says), or the chained
    /// outbound (`proxySettings.tag`), which gets the name unresolved.
    pub dialer: Arc<dyn Dialer>,
    /// The DNS module (a `dns` section), which UseIP* resolve through as in Xray; without
    /// one, and always for AsIs, the system resolver.
    pub resolver: Option<Arc<dyn skiff_core::Resolve>>,
}

/// Where a connection to `destination` goes under `redirect`.
fn redirected(redirect: &Option<(String, u16)>, destination: &Address) -> Address {
    match redirect {
        None => destination.clone(),
        Some((host, port)) => {
            let port = if *port == 0 {
                destination.port()
            } else {
                *port
            };
            if host.is_empty() {
                destination.with_port(port)
            } else {
                Address::from_host(host, port)
            }
        }
    }
}

/// The addresses of `target` that `resolve` allows, from the DNS module when there is one.
async fn addresses(
    resolve: Resolve,
    resolver: Option<&Arc<dyn skiff_core::Resolve>>,
    target: &Address,
) -> io::Result<Vec<SocketAddr>> {
    match target {
        Address::Ip(sa) => Ok(vec![*sa]),
        Address::Domain(name, port) => {
            let family = match resolve {
                Resolve::AsIs => None,
                Resolve::Any => Some(Family::Any),
                Resolve::V4 => Some(Family::V4),
                Resolve::V6 => Some(Family::V6),
            };
            if let (Some(resolver), Some(family)) = (resolver, family) {
                let ips = resolver.lookup(name, family).await?;
                return Ok(ips
                    .into_iter()
                    .map(|ip| SocketAddr::new(ip, *port))
                    .collect());
            }
            let all: Vec<SocketAddr> = tokio::net::lookup_host((name.as_str(), *port))
                .await?
                .collect();
            let wanted: Vec<SocketAddr> = all
                .into_iter()
                .filter(|sa| match resolve {
                    Resolve::AsIs | Resolve::Any => true,
                    Resolve::V4 => sa.is_ipv4(),
                    Resolve::V6 => sa.is_ipv6(),
                })
                .collect();
            if wanted.is_empty() {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("{name} has no address of the wanted family"),
                ));
            }
            Ok(wanted)
        }
    }
}

impl Freedom {
    async fn dial(&self, meta: &Metadata, target: &Address) -> io::Result<BoxStream> {
        if self.dialer.is_chained() {
            return self.dialer.dial(target, meta).await;
        }
        let mut last_error = None;
        for addr in addresses(self.resolve, self.resolver.as_ref(), target).await? {
            match self.dialer.dial(&Address::Ip(addr), meta).await {
                Ok(stream) => return Ok(stream),
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error.unwrap_or_else(|| io::ErrorKind::NotFound.into()))
    }
}

impl Outbound for Freedom {
    fn connect<'a>(
        &'a self,
        meta: &'a Metadata,
        destination: &'a Address,
    ) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            let target = redirected(&self.redirect, destination);
            self.dial(meta, &target).await
        })
    }

    fn bind<'a>(&'a self, _meta: &'a Metadata) -> BoxFuture<'a, io::Result<BoxPacketConn>> {
        Box::pin(async move {
            // One dual-stack socket serves both families; fall back to IPv4 where IPv6 is off.
            let socket = match UdpSocket::bind((Ipv6Addr::UNSPECIFIED, 0)).await {
                Ok(s) => s,
                Err(_) => UdpSocket::bind(("0.0.0.0", 0)).await?,
            };
            // Asked once: a getsockname per datagram was most of a small flow's system calls.
            let dual_stack = matches!(socket.local_addr(), Ok(SocketAddr::V6(_)));
            let conn: BoxPacketConn = Box::new(DirectPackets {
                socket,
                dual_stack,
                resolve: self.resolve,
                redirect: self.redirect.clone(),
                resolver: self.resolver.clone(),
            });
            Ok(conn)
        })
    }
}

struct DirectPackets {
    socket: UdpSocket,
    /// The socket is IPv6 (dual-stack); otherwise the IPv4 fallback.
    dual_stack: bool,
    resolve: Resolve,
    redirect: Option<(String, u16)>,
    resolver: Option<Arc<dyn skiff_core::Resolve>>,
}

impl DirectPackets {
    /// Adapts an address to the socket's family (IPv4 → v4-mapped on a dual-stack socket).
    fn fit(&self, addr: SocketAddr) -> SocketAddr {
        match (self.dual_stack, addr) {
            (true, SocketAddr::V4(v4)) => {
                SocketAddr::new(IpAddr::V6(v4.ip().to_ipv6_mapped()), v4.port())
            }
            _ => addr,
        }
    }
}

impl PacketConn for DirectPackets {
    fn poll_recv_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<Address>> {
        self.socket.poll_recv_from(cx, buf).map_ok(|from| {
            // Report IPv4 peers as IPv4, whatever the socket family.
            let ip = match from.ip() {
                IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(from.ip()),
                v4 => v4,
            };
            Address::Ip(SocketAddr::new(ip, from.port()))
        })
    }

    fn send_to<'a>(
        &'a self,
        payload: &'a [u8],
        destination: &'a Address,
    ) -> BoxFuture<'a, io::Result<()>> {
        Box::pin(async move {
            let target = redirected(&self.redirect, destination);
            let addr = match &target {
                Address::Ip(sa) => *sa,
                domain => {
                    let all = addresses(self.resolve, self.resolver.as_ref(), domain).await?;
                    let v4_only = !self.dual_stack;
                    all.into_iter()
                        .find(|sa| !v4_only || sa.is_ipv4())
                        .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?
                }
            };
            self.socket.send_to(payload, self.fit(addr)).await.map(drop)
        })
    }
}
