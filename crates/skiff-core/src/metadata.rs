//! What Skiff knows about one session as it travels the data path.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::{Address, Network};

/// Built by the listener, completed by the inbound's handshake (destination, user), read by
/// the router and the outbound. Cheap to clone: strings are shared.
#[derive(Clone, Debug)]
pub struct Metadata {
    pub inbound_tag: Arc<str>,
    /// The peer of the accepted connection.
    pub source: SocketAddr,
    /// The local address the connection arrived on.
    pub local: SocketAddr,
    pub network: Network,
    /// Filled in by the inbound's handshake.
    pub destination: Option<Address>,
    /// The authenticated user's email (or account name), when the protocol has users.
    pub user: Option<Arc<str>>,
    /// Policy level of the user or inbound.
    pub level: u32,
    /// What sniffing recognised on the first bytes (`http`, `tls`, `quic`), for rules'
    /// `protocol`.
    pub protocol: Option<&'static str>,
    /// HTTP attributes sniffing read (`:method`, `:path`, lower-case header names), for rules'
    /// `attrs`.
    pub attributes: Option<Arc<[(String, String)]>>,
    /// The sniffed destination when sniffing is `routeOnly`: routing matches it, the outbound
    /// still connects to `destination`.
    pub route_destination: Option<Address>,
    /// The destination the client asked for, when sniffing replaced it (access logs show
    /// this one, as Xray's do).
    pub requested_destination: Option<Address>,
}

impl Metadata {
    pub fn new(inbound_tag: Arc<str>, source: SocketAddr, local: SocketAddr) -> Metadata {
        Metadata {
            inbound_tag,
            source,
            local,
            network: Network::Tcp,
            destination: None,
            user: None,
            level: 0,
            protocol: None,
            attributes: None,
            route_destination: None,
            requested_destination: None,
        }
    }

    /// The destination routing matches: the route-only sniffed one, else the real one.
    pub fn routing_destination(&self) -> Option<&Address> {
        self.route_destination
            .as_ref()
            .or(self.destination.as_ref())
    }
}
