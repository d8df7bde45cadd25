//! Skiff's shared vocabulary: addresses, session metadata, stream and datagram abstractions,
//! the inbound/outbound traits, the dialer and layer traits, byte counters and the relay (copy and splice).

pub mod activity;
pub mod address;
pub mod buffers;
pub mod net;

pub use address::Address;
pub use net::{Cidr, Network, Networks, PortRange};
pub mod counted;
pub mod datagram;
pub mod datagram_batch;
pub mod handshake;
pub mod layer;
pub mod metadata;
pub mod online;
pub mod stream;

pub use counted::Counted;
pub use handshake::{
    Accepted, BoxFuture, ConnectOutcome, Connector, Inbound, InboundContext, PacketConnector,
    Reply, RoutedPackets,
};
pub use layer::{ClientLayer, LayerSession, MultiplexServer, ServerLayer, TunnelSink};
pub use metadata::Metadata;
pub use stream::{BoxStream, DirectSwitch, Prefixed, ProxyStream};
pub mod handshake_failures;
pub mod live_connections;
pub mod relay;
pub mod stats;
pub mod swap;
pub mod tcp_tuning;
pub mod time;
pub mod udp_links;
pub mod wire;

pub use handshake_failures::{HandshakeFailure, HandshakeFailures};
pub use relay::{RelayCounters, RelayEnd, RelayOutcome, RelayPolicy, relay};
pub use stats::{Counter, DirectionCounters, Stats};
pub use swap::Swap;
pub mod outbound;

pub use outbound::{BoxPacketConn, Dialer, Outbound, OutboundDialer, PacketConn};
pub mod resolve;

pub use resolve::{Family, Resolve};
