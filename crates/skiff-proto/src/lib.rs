//! Proxy protocols. Each protocol is a sans-IO codec (bytes in, values or bytes out) with a
//! thin async adapter on top; the codecs are what the property tests and fuzz targets drive.

pub mod address;
pub mod blackhole;
pub mod datagram;
pub mod fallback;
mod first_read;
pub mod freedom;
mod header_first;
pub mod http;
pub mod mux;
pub mod proxy_protocol;
pub mod shadowsocks;
pub mod socks;
#[cfg(test)]
mod test_dialer;
pub mod trojan;
pub mod tunnel;
pub mod udpspeeder;
pub mod user_id;
pub mod vless;
pub mod vmess;
