//! The dokodemo-door (`tunnel`) inbound: no handshake at all. The destination is fixed by the
//! config, or, with followRedirect, is the address an iptables REDIRECT/TPROXY rule rewrote.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use skiff_core::Address;
use tokio::net::TcpStream;

#[derive(Clone, Debug)]
pub struct TunnelConfig {
    pub destination: Option<Address>,
    pub follow_redirect: bool,
}

impl TunnelConfig {
    /// Where this accepted connection should go.
    pub fn destination_for(&self, stream: &TcpStream) -> io::Result<Address> {
        if self.follow_redirect {
            let local = stream.local_addr()?;
            match original_destination(stream) {
                // Without a redirect rule the "original" destination is simply our own
                // listener; relaying to it would loop forever.
                Ok(original) if original != local => return Ok(Address::Ip(original)),
                Ok(_) | Err(_) => {}
            }
        }
        self.destination.clone().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "no redirected destination and no configured address",
            )
        })
    }
}

#[cfg(target_os = "linux")]
fn original_destination(stream: &TcpStream) -> io::Result<SocketAddr> {
    use std::os::fd::AsRawFd;
    // linux/netfilter_ipv4.h and netfilter_ipv6/ip6_tables.h both use 80.
    const SO_ORIGINAL_DST: libc::c_int = 80;
    let fd = stream.as_raw_fd();
    if stream.local_addr()?.is_ipv4() {
        // SAFETY: sockaddr_in is plain old data; zeroed is a valid value.
        let mut addr: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        // SAFETY: addr/len describe a writable buffer of the size passed.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_IP,
                SO_ORIGINAL_DST,
                (&raw mut addr).cast(),
                &mut len,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        let ip = Ipv4Addr::from(u32::from_be(addr.sin_addr.s_addr));
        Ok(SocketAddr::V4(SocketAddrV4::new(
            ip,
            u16::from_be(addr.sin_port),
        )))
    } else {
        // SAFETY: as above, for sockaddr_in6.
        let mut addr: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t;
        // SAFETY: addr/len describe a writable buffer of the size passed.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_IPV6,
                SO_ORIGINAL_DST,
                (&raw mut addr).cast(),
                &mut len,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        let ip = Ipv6Addr::from(addr.sin6_addr.s6_addr);
        Ok(SocketAddr::V6(SocketAddrV6::new(
            ip,
            u16::from_be(addr.sin6_port),
            0,
            0,
        )))
    }
}

#[cfg(not(target_os = "linux"))]
fn original_destination(_stream: &TcpStream) -> io::Result<SocketAddr> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "followRedirect needs Linux",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn without_redirect_rule_falls_back_to_configured_address() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = TcpStream::connect(addr).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let fixed = Address::Domain("example.test".into(), 9);
        let cfg = TunnelConfig {
            destination: Some(fixed.clone()),
            follow_redirect: true,
        };
        assert_eq!(cfg.destination_for(&server).unwrap(), fixed);
        let none = TunnelConfig {
            destination: None,
            follow_redirect: true,
        };
        assert!(none.destination_for(&server).is_err());
        drop(client);
    }
}
