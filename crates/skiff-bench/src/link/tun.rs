//! TUN devices: one per namespace, the two ends of the emulated link. The kernel hands us every
//! IP packet routed into the device and takes every packet we write as if it arrived on it.

use std::fs::OpenOptions;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;

use super::netns::{self, run_ip};

/// Opens a TUN device called `name` inside namespace `ns`; the fd is non-blocking (the forwarder
/// polls it) and the device lives as long as the fd (it is not made persistent, so a crash can't
/// leak it).
///
/// A TUN device belongs to the namespace of the thread that opened /dev/net/tun, hence the helper
/// thread that enters `ns` first. Plain IFF_TUN | IFF_NO_PI: each read or write is exactly one IP
/// packet. No offloads (IFF_VNET_HDR/TUNSETOFFLOAD): a large MTU gets the same per-packet savings
/// for TCP without virtio headers and partial checksums to carry.
pub fn open_in(ns: &str, name: &str) -> io::Result<OwnedFd> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("TUN name `{name}` must have 1..{} bytes", libc::IFNAMSIZ),
        ));
    }
    netns::run_in(ns, || open_here(name))?
        .map_err(|e| io::Error::new(e.kind(), format!("TUN device {name} in {ns}: {e}")))
}

fn open_here(name: &str) -> io::Result<OwnedFd> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open("/dev/net/tun")
        .map_err(|e| io::Error::new(e.kind(), format!("/dev/net/tun: {e}")))?;
    // SAFETY: ifreq is plain data; all-zero is a valid (empty) request.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, &src) in req.ifr_name.iter_mut().zip(name.as_bytes()) {
        *dst = src as libc::c_char;
    }
    req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes one ifreq, which outlives the call.
    if unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF, &mut req) } < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("ioctl TUNSETIFF: {e}")));
    }
    Ok(OwnedFd::from(file))
}

/// Gives device `name` in `ns` the address `addr/prefix`, the MTU, and brings it up.
/// The transmit queue holds 10 000 packets rather than TUN's 500: the queue sits in front of
/// the emulator, so a burst that arrives while the forwarder is off the CPU would otherwise be
/// dropped before the link sees it, as loss no setting asked for (the link's own queue, which
/// the spec sets, is the one that should overflow).
/// `addrgenmode none` keeps IPv6 from giving it a link-local address and sending router
/// solicitations and MLD reports across the link, so the counters see only the bench's traffic.
pub fn configure(ns: &str, name: &str, addr: Ipv4Addr, prefix: u8, mtu: u32) -> io::Result<()> {
    run_ip(&["-n", ns, "link", "set", "dev", name, "addrgenmode", "none"])?;
    run_ip(&[
        "-n",
        ns,
        "addr",
        "add",
        &format!("{addr}/{prefix}"),
        "dev",
        name,
    ])?;
    run_ip(&[
        "-n",
        ns,
        "link",
        "set",
        "dev",
        name,
        "mtu",
        &mtu.to_string(),
        "txqueuelen",
        "10000",
        "up",
    ])
}
