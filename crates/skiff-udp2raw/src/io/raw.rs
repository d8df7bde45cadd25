//! Linux raw sockets, of one IP family (the tunnel's: its server address's): an `AF_PACKET`
//! socket bound to that family's ethertype (`ETH_P_IP` or `ETH_P_IPV6`) to read every packet
//! of it (before netfilter's INPUT chain, so a rule dropping the fake flows there leaves them
//! visible to us), and an `AF_INET` or `AF_INET6` socket of `IPPROTO_RAW` to send packets
//! whose IP header we build. On `AF_INET6`, `IPPROTO_RAW` implies `IPV6_HDRINCL` (Linux sets
//! it at socket creation); the kernel then sends the packet as given, payload length and
//! transport checksum included, to the `sockaddr_in6` destination (the header's own
//! destination is not used for routing). As udp2raw, no scope id is given, so a link-local
//! server address is not reachable.

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The IP family a tunnel runs over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    /// The family of `ip`.
    pub fn of(ip: IpAddr) -> Family {
        match ip {
            IpAddr::V4(_) => Family::V4,
            IpAddr::V6(_) => Family::V6,
        }
    }
}

/// The send and receive raw sockets of one tunnel end.
#[derive(Debug)]
pub struct RawSocket {
    family: Family,
    send: OwnedFd,
    recv: OwnedFd,
}

/// The error a raw socket call gives without the privilege, said plainly.
fn privilege_error(what: &str, e: io::Error) -> io::Error {
    if matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) {
        io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "udp2raw needs root or CAP_NET_RAW to open its raw sockets ({what}: {e}); \
                 run as root or grant the capability (setcap cap_net_raw,cap_net_admin+ep)"
            ),
        )
    } else {
        io::Error::new(e.kind(), format!("udp2raw {what}: {e}"))
    }
}

fn new_socket(domain: i32, ty: i32, proto: i32, what: &str) -> io::Result<OwnedFd> {
    // SAFETY: socket() has no memory preconditions; the descriptor is owned at once.
    let fd = unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK, proto) };
    if fd < 0 {
        return Err(privilege_error(what, io::Error::last_os_error()));
    }
    // SAFETY: fd is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// What each of the tunnel's sockets may queue: a KCP window's burst (2048 segments of
/// ~1.4 KB) arrives faster than one thread decrypts it, and the kernel's default (~208 KiB)
/// drops the rest. The same as Skiff's kcptun `sockbuf`; net.core.rmem_max/wmem_max cap it.
const SOCKET_BUFFER: libc::c_int = 4 << 20;

fn set_buffer(fd: RawFd, option: libc::c_int) {
    // SAFETY: setsockopt with a c_int of the size given; failure only leaves the default.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            option,
            (&SOCKET_BUFFER as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as u32,
        );
    }
}

/// Sizes a UDP socket of the tunnel (a conversation's, or the client's listening one) both
/// ways as the raw socket is sized.
pub fn size_udp(socket: &std::net::UdpSocket) {
    set_buffer(socket.as_raw_fd(), libc::SO_RCVBUF);
    set_buffer(socket.as_raw_fd(), libc::SO_SNDBUF);
}

impl RawSocket {
    /// Opens both sockets of `family`; fails with a message naming root / CAP_NET_RAW when
    /// refused.
    pub fn open(family: Family) -> io::Result<RawSocket> {
        let (ethertype, domain, what) = match family {
            Family::V4 => (libc::ETH_P_IP, libc::AF_INET, "raw IPv4 socket"),
            Family::V6 => (libc::ETH_P_IPV6, libc::AF_INET6, "raw IPv6 socket"),
        };
        let recv = new_socket(
            libc::AF_PACKET,
            libc::SOCK_DGRAM,
            i32::from((ethertype as u16).to_be()),
            "AF_PACKET socket",
        )?;
        let send = new_socket(domain, libc::SOCK_RAW, libc::IPPROTO_RAW, what)?;
        set_buffer(recv.as_raw_fd(), libc::SO_RCVBUF);
        Ok(RawSocket { family, send, recv })
    }

    /// The family the sockets were opened for.
    pub fn family(&self) -> Family {
        self.family
    }

    /// The descriptor to poll for readability.
    pub fn recv_fd(&self) -> RawFd {
        self.recv.as_raw_fd()
    }

    /// Sends one IP packet (header included) to `dst`, of the sockets' family.
    pub fn send_to(&self, packet: &[u8], dst: IpAddr) -> io::Result<()> {
        let fd = self.send.as_raw_fd();
        let n = match (self.family, dst) {
            // SAFETY: sendto with a valid buffer and a sockaddr_in of the size given.
            (Family::V4, IpAddr::V4(d)) => unsafe {
                let mut addr: libc::sockaddr_in = std::mem::zeroed();
                addr.sin_family = libc::AF_INET as libc::sa_family_t;
                addr.sin_addr.s_addr = u32::from_ne_bytes(d.octets());
                libc::sendto(
                    fd,
                    packet.as_ptr().cast(),
                    packet.len(),
                    0,
                    (&addr as *const libc::sockaddr_in).cast(),
                    std::mem::size_of::<libc::sockaddr_in>() as u32,
                )
            },
            // SAFETY: sendto with a valid buffer and a sockaddr_in6 of the size given.
            (Family::V6, IpAddr::V6(d)) => unsafe {
                let mut addr: libc::sockaddr_in6 = std::mem::zeroed();
                addr.sin6_family = libc::AF_INET6 as libc::sa_family_t;
                addr.sin6_addr.s6_addr = d.octets();
                libc::sendto(
                    fd,
                    packet.as_ptr().cast(),
                    packet.len(),
                    0,
                    (&addr as *const libc::sockaddr_in6).cast(),
                    std::mem::size_of::<libc::sockaddr_in6>() as u32,
                )
            },
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{dst} is not of the tunnel's IP family ({:?})", self.family),
                ));
            }
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// The next packet received (outgoing copies skipped) into `buf`, or `None` when nothing
    /// is waiting.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        loop {
            // SAFETY: recvfrom into `buf` and a sockaddr_ll of the sizes given.
            let (n, pkttype) = unsafe {
                let mut addr: libc::sockaddr_ll = std::mem::zeroed();
                let mut len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
                let n = libc::recvfrom(
                    self.recv.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    0,
                    (&mut addr as *mut libc::sockaddr_ll).cast(),
                    &mut len,
                );
                (n, addr.sll_pkttype)
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                return match e.kind() {
                    io::ErrorKind::WouldBlock => Ok(None),
                    io::ErrorKind::Interrupted => continue,
                    _ => Err(e),
                };
            }
            if pkttype == libc::PACKET_OUTGOING {
                continue;
            }
            return Ok(Some(n as usize));
        }
    }
}

/// Waits until one of `fds` is readable or `timeout_ms` passes; returns which are readable.
pub fn poll_readable(fds: &[RawFd], timeout_ms: i32) -> io::Result<Vec<bool>> {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: poll over a buffer of p.len() pollfd structs.
    let rc = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, timeout_ms) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(vec![false; fds.len()]);
        }
        return Err(e);
    }
    Ok(p.iter().map(|x| x.revents != 0).collect())
}

/// Random bytes from the kernel.
pub fn random_bytes(buf: &mut [u8]) {
    let mut done = 0;
    while done < buf.len() {
        // SAFETY: getrandom writes at most the length given into the buffer.
        let n = unsafe { libc::getrandom(buf[done..].as_mut_ptr().cast(), buf.len() - done, 0) };
        if n > 0 {
            done += n as usize;
        }
    }
}

pub fn random_u32() -> u32 {
    let mut b = [0u8; 4];
    random_bytes(&mut b);
    u32::from_ne_bytes(b)
}

pub fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    random_bytes(&mut b);
    u64::from_ne_bytes(b)
}

/// A random non-zero u32 (udp2raw's ids).
pub fn random_nz() -> u32 {
    loop {
        let v = random_u32();
        if v != 0 {
            return v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_privilege_is_said_plainly() {
        let e = privilege_error(
            "AF_PACKET socket",
            io::Error::from_raw_os_error(libc::EPERM),
        );
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        let msg = e.to_string();
        assert!(msg.contains("root or CAP_NET_RAW"), "{msg}");
        let e = privilege_error("x", io::Error::from_raw_os_error(libc::EMFILE));
        assert!(!e.to_string().contains("CAP_NET_RAW"));
    }
}
