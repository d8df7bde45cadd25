//! Skiff's DNS module (Xray's `dns` section): a `hosts` table, upstream servers over UDP,
//! TCP, TLS (DoT), HTTPS (DoH) or the system resolver, Xray's server selection and
//! `expectIPs` filtering, and a TTL cache. The wire format is hickory-proto's; this crate
//! holds what is asked, of whom, and what is kept.

pub mod cache;
pub mod config;
pub mod error;
pub mod hosts;
pub mod message;
pub mod outbound;
pub mod resolver;
pub mod upstream;

pub use config::{
    DnsConfig, Endpoint, Host, HostEntry, HostValue, IpFilter, QueryStrategy, ServerConfig,
};
pub use error::DnsError;
pub use resolver::Resolver;
pub use upstream::tls::TlsRoots;
