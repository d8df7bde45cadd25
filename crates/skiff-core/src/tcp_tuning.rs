//! Options Skiff sets on every proxied TCP connection once it is established: no delay, and
//! the congestion control.
//!
//! The congestion control is the one the config names (`sockopt.tcpcongestion`, as in Xray).
//! Without one, loopback peers get Reno and other peers keep the system's default. On a
//! loopback path there is no queue to manage, but BBR (the usual system default on this
//! community's servers) paces every segment with a high-resolution timer, and on a virtual
//! machine each timer costs an exit to the hypervisor. On the bench's loopback path, pacing
//! was about a third of a splice relay's CPU (0.26 → 0.15 CPU-s/GiB per side). Peers across
//! a real link, where pacing earns its keep, are left alone.

use std::io;
use std::net::IpAddr;
use std::sync::Arc;

use tokio::net::TcpStream;

/// Reno is built into every Linux kernel and allowed to unprivileged processes.
pub const LOOPBACK_CONGESTION_CONTROL: &str = "reno";

/// How one inbound or outbound tunes the TCP connections it accepts or dials.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TcpTuning {
    /// `sockopt.tcpcongestion`: this algorithm for every connection, loopback or not.
    pub congestion: Option<Arc<str>>,
}

impl TcpTuning {
    /// Applies the tuning to an established connection. Only a failing no-delay is an error;
    /// an algorithm the kernel refuses leaves the default in place (logged at debug).
    pub fn apply(&self, stream: &TcpStream) -> io::Result<()> {
        // Proxied traffic is often interactive; Nagle only adds latency.
        stream.set_nodelay(true)?;
        if let Some(name) = self.congestion_for(stream.peer_addr().ok().map(|a| a.ip())) {
            set_congestion_control(stream, name);
        }
        Ok(())
    }

    /// The algorithm to set for a connection to `peer`, if any.
    pub fn congestion_for(&self, peer: Option<IpAddr>) -> Option<&str> {
        match (&self.congestion, peer) {
            (Some(name), _) => Some(name),
            (None, Some(ip)) if is_loopback(ip) => Some(LOOPBACK_CONGESTION_CONTROL),
            (None, _) => None,
        }
    }
}

/// True for 127.0.0.0/8, ::1 and IPv4-mapped loopback (a dual-stack socket reports those).
pub fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or(v6.is_loopback(), |v4| v4.is_loopback()),
        IpAddr::V4(v4) => v4.is_loopback(),
    }
}

#[cfg(target_os = "linux")]
fn set_congestion_control(stream: &TcpStream, name: &str) {
    if let Err(e) = socket2::SockRef::from(stream).set_tcp_congestion(name.as_bytes()) {
        tracing::debug!(algorithm = name, error = %e, "TCP congestion control not set; the system default stays");
    }
}

#[cfg(not(target_os = "linux"))]
fn set_congestion_control(_stream: &TcpStream, _name: &str) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_covers_both_families_and_mapped_addresses() {
        for ip in ["127.0.0.1", "127.3.2.1", "::1", "::ffff:127.0.0.1"] {
            assert!(is_loopback(ip.parse().unwrap()), "{ip}");
        }
        for ip in [
            "10.0.0.1",
            "192.0.2.7",
            "::ffff:192.0.2.7",
            "2001:db8::1",
            "::",
        ] {
            assert!(!is_loopback(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn the_configured_algorithm_wins_and_loopback_gets_reno_by_default() {
        let default = TcpTuning::default();
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        let remote: IpAddr = "192.0.2.7".parse().unwrap();
        assert_eq!(default.congestion_for(Some(lo)), Some("reno"));
        assert_eq!(default.congestion_for(Some(remote)), None);
        assert_eq!(default.congestion_for(None), None);
        let bbr = TcpTuning {
            congestion: Some("bbr".into()),
        };
        assert_eq!(bbr.congestion_for(Some(lo)), Some("bbr"));
        assert_eq!(bbr.congestion_for(Some(remote)), Some("bbr"));
    }

    /// The kernel really runs Reno on an accepted and a dialed loopback connection.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn loopback_connections_run_reno() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (dialed, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
        let (dialed, (accepted, _)) = (dialed.unwrap(), accepted.unwrap());
        for stream in [&dialed, &accepted] {
            TcpTuning::default().apply(stream).unwrap();
            let name = socket2::SockRef::from(stream).tcp_congestion().unwrap();
            let name = String::from_utf8_lossy(&name);
            assert_eq!(name.trim_end_matches('\0'), "reno");
            assert!(stream.nodelay().unwrap());
        }
    }
}
