//! The outer headers udp2raw writes around its encrypted payload, as pure functions.
//!
//! - IPv4: 20 bytes, no options, DF set, the TTL (64 by default) and an id counter (random
//!   start, +1 per packet). udp2raw leaves total length and checksum at 0 for the kernel to
//!   fill on a raw socket; these builders fill both. IPv6: 40 bytes, no extension headers.
//! - fake TCP: 20 bytes + options. A SYN or SYN-ACK carries 20 option bytes:
//!   `MSS 1460 | SACK-permitted | timestamps (val, ecr) | NOP | window scale 5`; every other
//!   segment 12: `NOP NOP | timestamps (val, ecr)`. Window: 40960 + a random 0..512. No URG,
//!   no FIN. On receive, udp2raw does not drop a segment whose TCP checksum fails (offloads
//!   make it unreliable); [`TcpSegment::checksum_ok`] says whether it verified.
//! - UDP: 8 bytes; the receiver requires the length field to equal the IP payload length and
//!   the checksum to verify.
//! - ICMP echo: the client sends requests (type 8, or 128 for ICMPv6), the server replies
//!   (0 / 129), code 0, identifier = the client's chosen "port", sequence number = a counter
//!   the client increments per packet and the server echoes. ICMPv4 checksum over the
//!   message, ICMPv6 with the IPv6 pseudo-header.

use std::net::IpAddr;

use crate::{Error, truncated};

pub const IPPROTO_ICMP: u8 = 1;
pub const IPPROTO_TCP: u8 = 6;
pub const IPPROTO_UDP: u8 = 17;
pub const IPPROTO_ICMPV6: u8 = 58;

/// udp2raw's default TTL / hop limit.
pub const DEFAULT_TTL: u8 = 64;
/// The window-scale shift udp2raw announces in its SYN.
pub const WSCALE: u8 = 5;
/// The MSS udp2raw announces in its SYN.
pub const MSS: u16 = 1460;
/// Lower bound of the advertised TCP window (udp2raw adds a random 0..512).
pub const WINDOW_BASE: u16 = 40960;

/// `--raw-mode`: what the outer transport header pretends to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RawMode {
    FakeTcp,
    Udp,
    Icmp,
}

impl RawMode {
    pub const ALL: [RawMode; 3] = [RawMode::FakeTcp, RawMode::Udp, RawMode::Icmp];

    /// The name `--raw-mode` takes.
    pub fn name(self) -> &'static str {
        match self {
            RawMode::FakeTcp => "faketcp",
            RawMode::Udp => "udp",
            RawMode::Icmp => "icmp",
        }
    }

    pub fn from_name(name: &str) -> Option<RawMode> {
        RawMode::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// The Internet checksum (RFC 1071) of `parts` concatenated, each part starting on an even
/// offset except possibly the last. Returns the value to store (0 when verifying a correct
/// header that includes its checksum).
pub fn checksum(parts: &[&[u8]]) -> u16 {
    let mut sum: u64 = 0;
    for part in parts {
        let mut chunks = part.chunks_exact(2);
        for c in &mut chunks {
            sum += u64::from(u16::from_be_bytes([c[0], c[1]]));
        }
        if let [last] = chunks.remainder() {
            sum += u64::from(u16::from_be_bytes([*last, 0]));
        }
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The TCP/UDP/ICMPv6 pseudo-header of `src`/`dst` (both the same family).
fn pseudo(src: IpAddr, dst: IpAddr, proto: u8, len: usize) -> Result<([u8; 40], usize), Error> {
    let mut p = [0u8; 40];
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let len = u16::try_from(len).map_err(|_| Error::TooLong {
                what: "IPv4 payload",
                len,
                max: 65515,
            })?;
            p[0..4].copy_from_slice(&s.octets());
            p[4..8].copy_from_slice(&d.octets());
            p[9] = proto;
            p[10..12].copy_from_slice(&len.to_be_bytes());
            Ok((p, 12))
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let len = u16::try_from(len).map_err(|_| Error::TooLong {
                what: "IPv6 payload",
                len,
                max: 65535,
            })?;
            p[0..16].copy_from_slice(&s.octets());
            p[16..32].copy_from_slice(&d.octets());
            p[34..36].copy_from_slice(&len.to_be_bytes());
            p[39] = proto;
            Ok((p, 40))
        }
        _ => Err(Error::Malformed(
            "source and destination are of different IP families",
        )),
    }
}

/// Fields of an IP header udp2raw sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpHeader {
    pub src: IpAddr,
    pub dst: IpAddr,
    /// Protocol (IPv4) or next header (IPv6).
    pub protocol: u8,
    /// TTL or hop limit.
    pub ttl: u8,
    /// IPv4 identification (ignored for IPv6).
    pub id: u16,
}

/// Appends an IPv4 or IPv6 packet of `payload` (by the family of `h.src`).
pub fn build_ip(h: &IpHeader, payload: &[u8], out: &mut Vec<u8>) -> Result<(), Error> {
    match (h.src, h.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let total = 20 + payload.len();
            let total = u16::try_from(total).map_err(|_| Error::TooLong {
                what: "IPv4 packet",
                len: total,
                max: 65535,
            })?;
            let mut hdr = [0u8; 20];
            hdr[0] = 0x45;
            hdr[2..4].copy_from_slice(&total.to_be_bytes());
            hdr[4..6].copy_from_slice(&h.id.to_be_bytes());
            hdr[6] = 0x40; // DF
            hdr[8] = h.ttl;
            hdr[9] = h.protocol;
            hdr[12..16].copy_from_slice(&s.octets());
            hdr[16..20].copy_from_slice(&d.octets());
            let c = checksum(&[&hdr]);
            hdr[10..12].copy_from_slice(&c.to_be_bytes());
            out.extend_from_slice(&hdr);
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let len = u16::try_from(payload.len()).map_err(|_| Error::TooLong {
                what: "IPv6 payload",
                len: payload.len(),
                max: 65535,
            })?;
            let mut hdr = [0u8; 40];
            hdr[0] = 0x60;
            hdr[4..6].copy_from_slice(&len.to_be_bytes());
            hdr[6] = h.protocol;
            hdr[7] = h.ttl;
            hdr[8..24].copy_from_slice(&s.octets());
            hdr[24..40].copy_from_slice(&d.octets());
            out.extend_from_slice(&hdr);
        }
        _ => {
            return Err(Error::Malformed(
                "source and destination are of different IP families",
            ));
        }
    }
    out.extend_from_slice(payload);
    Ok(())
}

/// A parsed IP packet: header fields and the transport bytes (trailing link padding cut).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpPacket<'a> {
    pub header: IpHeader,
    pub payload: &'a [u8],
}

/// Parses an IPv4 packet (options skipped, header checksum verified, fragments refused) or an
/// IPv6 packet (no extension headers, as udp2raw).
pub fn parse_ip(packet: &[u8]) -> Result<IpPacket<'_>, Error> {
    let Some(&first) = packet.first() else {
        return Err(truncated("IP packet", 0, 20));
    };
    match first >> 4 {
        4 => {
            if packet.len() < 20 {
                return Err(truncated("IPv4 header", packet.len(), 20));
            }
            let ihl = usize::from(first & 0x0f) * 4;
            if ihl < 20 {
                return Err(Error::Malformed("IPv4 header length under 20"));
            }
            let total = usize::from(u16::from_be_bytes([packet[2], packet[3]]));
            if total < ihl {
                return Err(Error::Malformed(
                    "IPv4 total length under the header length",
                ));
            }
            if packet.len() < total {
                return Err(truncated("IPv4 packet", packet.len(), total));
            }
            if checksum(&[&packet[..ihl]]) != 0 {
                return Err(Error::Checksum("IPv4 header"));
            }
            let frag = u16::from_be_bytes([packet[6], packet[7]]);
            if frag & 0x3fff != 0 {
                return Err(Error::Unexpected("IPv4 fragment"));
            }
            let src: [u8; 4] = packet[12..16].try_into().expect("4 bytes");
            let dst: [u8; 4] = packet[16..20].try_into().expect("4 bytes");
            Ok(IpPacket {
                header: IpHeader {
                    src: IpAddr::from(src),
                    dst: IpAddr::from(dst),
                    protocol: packet[9],
                    ttl: packet[8],
                    id: u16::from_be_bytes([packet[4], packet[5]]),
                },
                payload: &packet[ihl..total],
            })
        }
        6 => {
            if packet.len() < 40 {
                return Err(truncated("IPv6 header", packet.len(), 40));
            }
            let len = usize::from(u16::from_be_bytes([packet[4], packet[5]]));
            if packet.len() < 40 + len {
                return Err(truncated("IPv6 packet", packet.len(), 40 + len));
            }
            let src: [u8; 16] = packet[8..24].try_into().expect("16 bytes");
            let dst: [u8; 16] = packet[24..40].try_into().expect("16 bytes");
            Ok(IpPacket {
                header: IpHeader {
                    src: IpAddr::from(src),
                    dst: IpAddr::from(dst),
                    protocol: packet[6],
                    ttl: packet[7],
                    id: 0,
                },
                payload: &packet[40..40 + len],
            })
        }
        _ => Err(Error::Unexpected("IP version is neither 4 nor 6")),
    }
}

/// A fake TCP segment's header fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpHeader {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack_seq: u32,
    pub syn: bool,
    pub ack: bool,
    pub psh: bool,
    pub rst: bool,
    pub window: u16,
    /// Timestamp option: (TSval, TSecr). udp2raw always sends one: TSval is its clock in
    /// milliseconds (truncated to 32 bits), TSecr the peer's last TSval.
    pub timestamps: Option<(u32, u32)>,
}

/// Appends a fake TCP segment (header with udp2raw's options, then `payload`) with its
/// checksum over the pseudo-header of `src`/`dst`. `h.timestamps` of `None` writes zeros.
pub fn build_tcp(
    src: IpAddr,
    dst: IpAddr,
    h: &TcpHeader,
    payload: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), Error> {
    let (ts, ecr) = h.timestamps.unwrap_or((0, 0));
    let mut hdr = [0u8; 40];
    hdr[0..2].copy_from_slice(&h.src_port.to_be_bytes());
    hdr[2..4].copy_from_slice(&h.dst_port.to_be_bytes());
    hdr[4..8].copy_from_slice(&h.seq.to_be_bytes());
    hdr[8..12].copy_from_slice(&h.ack_seq.to_be_bytes());
    let hlen = if h.syn {
        hdr[20..24].copy_from_slice(&[2, 4, (MSS >> 8) as u8, MSS as u8]);
        hdr[24..26].copy_from_slice(&[4, 2]);
        hdr[26..28].copy_from_slice(&[8, 10]);
        hdr[28..32].copy_from_slice(&ts.to_be_bytes());
        hdr[32..36].copy_from_slice(&ecr.to_be_bytes());
        hdr[36..40].copy_from_slice(&[1, 3, 3, WSCALE]);
        40
    } else {
        hdr[20..24].copy_from_slice(&[1, 1, 8, 10]);
        hdr[24..28].copy_from_slice(&ts.to_be_bytes());
        hdr[28..32].copy_from_slice(&ecr.to_be_bytes());
        32
    };
    hdr[12] = ((hlen / 4) as u8) << 4;
    hdr[13] =
        u8::from(h.syn) << 1 | u8::from(h.rst) << 2 | u8::from(h.psh) << 3 | u8::from(h.ack) << 4;
    hdr[14..16].copy_from_slice(&h.window.to_be_bytes());
    let (ph, plen) = pseudo(src, dst, IPPROTO_TCP, hlen + payload.len())?;
    let c = checksum(&[&ph[..plen], &hdr[..hlen], payload]);
    hdr[16..18].copy_from_slice(&c.to_be_bytes());
    out.extend_from_slice(&hdr[..hlen]);
    out.extend_from_slice(payload);
    Ok(())
}

/// A parsed TCP segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpSegment<'a> {
    pub header: TcpHeader,
    /// Whether the checksum verified (udp2raw accepts the segment either way).
    pub checksum_ok: bool,
    pub payload: &'a [u8],
}

/// Parses a TCP segment from `src` to `dst` the way udp2raw reads one: header length 20..=60,
/// the timestamp option looked for among the options (a malformed option list just means no
/// timestamps).
pub fn parse_tcp(src: IpAddr, dst: IpAddr, seg: &[u8]) -> Result<TcpSegment<'_>, Error> {
    if seg.len() < 20 {
        return Err(truncated("TCP header", seg.len(), 20));
    }
    let hlen = usize::from(seg[12] >> 4) * 4;
    if hlen < 20 {
        return Err(Error::Malformed("TCP data offset under 5"));
    }
    if hlen > seg.len() {
        return Err(truncated("TCP header with options", seg.len(), hlen));
    }
    let (ph, plen) = pseudo(src, dst, IPPROTO_TCP, seg.len())?;
    let checksum_ok = checksum(&[&ph[..plen], seg]) == 0;
    let flags = seg[13];
    let header = TcpHeader {
        src_port: u16::from_be_bytes([seg[0], seg[1]]),
        dst_port: u16::from_be_bytes([seg[2], seg[3]]),
        seq: u32::from_be_bytes(seg[4..8].try_into().expect("4 bytes")),
        ack_seq: u32::from_be_bytes(seg[8..12].try_into().expect("4 bytes")),
        syn: flags & 0x02 != 0,
        rst: flags & 0x04 != 0,
        psh: flags & 0x08 != 0,
        ack: flags & 0x10 != 0,
        window: u16::from_be_bytes([seg[14], seg[15]]),
        timestamps: find_timestamps(&seg[20..hlen]),
    };
    Ok(TcpSegment {
        header,
        checksum_ok,
        payload: &seg[hlen..],
    })
}

/// The timestamp option in a TCP option list, walked as udp2raw does (EOL ends, NOP skips,
/// any other kind needs a length of at least 2).
fn find_timestamps(mut opts: &[u8]) -> Option<(u32, u32)> {
    let mut found = None;
    while let Some(&kind) = opts.first() {
        match kind {
            0 => break,
            1 => opts = &opts[1..],
            _ => {
                let Some(&len) = opts.get(1) else {
                    return found;
                };
                let len = usize::from(len);
                if kind == 8 {
                    if len != 10 || opts.len() < 10 {
                        return found;
                    }
                    found = Some((
                        u32::from_be_bytes(opts[2..6].try_into().expect("4 bytes")),
                        u32::from_be_bytes(opts[6..10].try_into().expect("4 bytes")),
                    ));
                    opts = &opts[10..];
                } else {
                    if len < 2 {
                        return found;
                    }
                    opts = opts.get(len..).unwrap_or(&[]);
                }
            }
        }
    }
    found
}

/// Appends a UDP datagram with its checksum.
pub fn build_udp(
    src: IpAddr,
    dst: IpAddr,
    src_port: u16,
    dst_port: u16,
    payload: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), Error> {
    let total = 8 + payload.len();
    let len = u16::try_from(total).map_err(|_| Error::TooLong {
        what: "UDP datagram",
        len: total,
        max: 65535,
    })?;
    let mut hdr = [0u8; 8];
    hdr[0..2].copy_from_slice(&src_port.to_be_bytes());
    hdr[2..4].copy_from_slice(&dst_port.to_be_bytes());
    hdr[4..6].copy_from_slice(&len.to_be_bytes());
    let (ph, plen) = pseudo(src, dst, IPPROTO_UDP, total)?;
    let c = checksum(&[&ph[..plen], &hdr, payload]);
    hdr[6..8].copy_from_slice(&c.to_be_bytes());
    out.extend_from_slice(&hdr);
    out.extend_from_slice(payload);
    Ok(())
}

/// A parsed UDP datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpDatagram<'a> {
    pub src_port: u16,
    pub dst_port: u16,
    pub payload: &'a [u8],
}

/// Parses a UDP datagram as udp2raw does: length field equal to the bytes given, checksum
/// verified (so a zero "no checksum" field is refused, as udp2raw refuses it).
pub fn parse_udp(src: IpAddr, dst: IpAddr, dgram: &[u8]) -> Result<UdpDatagram<'_>, Error> {
    if dgram.len() < 8 {
        return Err(truncated("UDP header", dgram.len(), 8));
    }
    if usize::from(u16::from_be_bytes([dgram[4], dgram[5]])) != dgram.len() {
        return Err(Error::Malformed(
            "UDP length differs from the IP payload length",
        ));
    }
    let (ph, plen) = pseudo(src, dst, IPPROTO_UDP, dgram.len())?;
    if checksum(&[&ph[..plen], dgram]) != 0 {
        return Err(Error::Checksum("UDP"));
    }
    Ok(UdpDatagram {
        src_port: u16::from_be_bytes([dgram[0], dgram[1]]),
        dst_port: u16::from_be_bytes([dgram[2], dgram[3]]),
        payload: &dgram[8..],
    })
}

/// An ICMP or ICMPv6 echo message as udp2raw uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IcmpEcho<'a> {
    /// Request (client → server) or reply (server → client).
    pub request: bool,
    pub id: u16,
    pub seq: u16,
    pub payload: &'a [u8],
}

fn icmp_type(v6: bool, request: bool) -> u8 {
    match (v6, request) {
        (false, true) => 8,
        (false, false) => 0,
        (true, true) => 128,
        (true, false) => 129,
    }
}

/// Appends an echo request/reply (ICMPv6 when the addresses are IPv6).
pub fn build_icmp(
    src: IpAddr,
    dst: IpAddr,
    m: &IcmpEcho<'_>,
    out: &mut Vec<u8>,
) -> Result<(), Error> {
    let v6 = src.is_ipv6();
    let mut hdr = [0u8; 8];
    hdr[0] = icmp_type(v6, m.request);
    hdr[4..6].copy_from_slice(&m.id.to_be_bytes());
    hdr[6..8].copy_from_slice(&m.seq.to_be_bytes());
    let (ph, plen) = pseudo(src, dst, IPPROTO_ICMPV6, 8 + m.payload.len())?;
    let ph = if v6 { &ph[..plen] } else { &[][..] };
    let c = checksum(&[ph, &hdr, m.payload]);
    hdr[2..4].copy_from_slice(&c.to_be_bytes());
    out.extend_from_slice(&hdr);
    out.extend_from_slice(m.payload);
    Ok(())
}

/// Parses an echo request or reply, checksum verified; other types and codes are refused.
pub fn parse_icmp(src: IpAddr, dst: IpAddr, msg: &[u8]) -> Result<IcmpEcho<'_>, Error> {
    if msg.len() < 8 {
        return Err(truncated("ICMP header", msg.len(), 8));
    }
    let v6 = src.is_ipv6();
    let request = if msg[0] == icmp_type(v6, true) {
        true
    } else if msg[0] == icmp_type(v6, false) {
        false
    } else {
        return Err(Error::Unexpected(
            "ICMP type is not an echo request or reply",
        ));
    };
    if msg[1] != 0 {
        return Err(Error::Unexpected("ICMP echo code is not 0"));
    }
    let (ph, plen) = pseudo(src, dst, IPPROTO_ICMPV6, msg.len())?;
    let ph = if v6 { &ph[..plen] } else { &[][..] };
    if checksum(&[ph, msg]) != 0 {
        return Err(Error::Checksum("ICMP"));
    }
    Ok(IcmpEcho {
        request,
        id: u16::from_be_bytes([msg[4], msg[5]]),
        seq: u16::from_be_bytes([msg[6], msg[7]]),
        payload: &msg[8..],
    })
}

/// Any of the three, with what a tunnel needs from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport<'a> {
    Tcp(TcpSegment<'a>),
    Udp(UdpDatagram<'a>),
    Icmp(IcmpEcho<'a>),
}

impl<'a> Transport<'a> {
    /// The udp2raw payload (the encrypted bytes).
    pub fn payload(&self) -> &'a [u8] {
        match self {
            Transport::Tcp(t) => t.payload,
            Transport::Udp(u) => u.payload,
            Transport::Icmp(i) => i.payload,
        }
    }

    /// Source and destination "ports" (for ICMP, the echo identifier twice, as udp2raw).
    pub fn ports(&self) -> (u16, u16) {
        match self {
            Transport::Tcp(t) => (t.header.src_port, t.header.dst_port),
            Transport::Udp(u) => (u.src_port, u.dst_port),
            Transport::Icmp(i) => (i.id, i.id),
        }
    }
}

/// Parses an IP packet and its transport header for `mode`; a packet of another protocol is
/// [`Error::Unexpected`].
pub fn parse_packet(mode: RawMode, packet: &[u8]) -> Result<(IpHeader, Transport<'_>), Error> {
    let ip = parse_ip(packet)?;
    let (src, dst, p) = (ip.header.src, ip.header.dst, ip.header.protocol);
    let t = match mode {
        RawMode::FakeTcp if p == IPPROTO_TCP => Transport::Tcp(parse_tcp(src, dst, ip.payload)?),
        RawMode::Udp if p == IPPROTO_UDP => Transport::Udp(parse_udp(src, dst, ip.payload)?),
        RawMode::Icmp
            if (p == IPPROTO_ICMP && src.is_ipv4()) || (p == IPPROTO_ICMPV6 && src.is_ipv6()) =>
        {
            Transport::Icmp(parse_icmp(src, dst, ip.payload)?)
        }
        _ => return Err(Error::Unexpected("IP protocol is not the raw mode's")),
    };
    Ok((ip.header, t))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
    const A6: IpAddr = IpAddr::V6(Ipv6Addr::LOCALHOST);
    const B6: IpAddr = IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2));

    #[test]
    fn checksum_rfc1071_example() {
        // RFC 1071 §3: the sum of 0001 f203 f4f5 f6f7 is ddf2 before complement.
        assert_eq!(
            checksum(&[&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]]),
            !0xddf2
        );
    }

    #[test]
    fn tcp_syn_and_data_round_trip() {
        for (s, d) in [(A, B), (A6, B6)] {
            for syn in [true, false] {
                let h = TcpHeader {
                    src_port: 1234,
                    dst_port: 4096,
                    seq: 7,
                    ack_seq: 9,
                    syn,
                    ack: !syn,
                    psh: false,
                    rst: false,
                    window: 41000,
                    timestamps: Some((1, 2)),
                };
                let mut seg = Vec::new();
                build_tcp(s, d, &h, b"payload", &mut seg).unwrap();
                assert_eq!(seg.len(), if syn { 40 } else { 32 } + 7);
                let mut pkt = Vec::new();
                build_ip(
                    &IpHeader {
                        src: s,
                        dst: d,
                        protocol: IPPROTO_TCP,
                        ttl: 64,
                        id: 5,
                    },
                    &seg,
                    &mut pkt,
                )
                .unwrap();
                let (ip, t) = parse_packet(RawMode::FakeTcp, &pkt).unwrap();
                assert_eq!(ip.src, s);
                let Transport::Tcp(t) = t else { panic!() };
                assert!(t.checksum_ok);
                assert_eq!(t.header, h);
                assert_eq!(t.payload, b"payload");
            }
        }
    }

    #[test]
    fn udp_and_icmp_round_trip_and_reject_corruption() {
        for (s, d) in [(A, B), (A6, B6)] {
            let mut u = Vec::new();
            build_udp(s, d, 1, 2, b"xyz", &mut u).unwrap();
            assert_eq!(parse_udp(s, d, &u).unwrap().payload, b"xyz");
            u[9] ^= 1;
            assert_eq!(parse_udp(s, d, &u), Err(Error::Checksum("UDP")));

            let m = IcmpEcho {
                request: true,
                id: 77,
                seq: 3,
                payload: b"abc",
            };
            let mut i = Vec::new();
            build_icmp(s, d, &m, &mut i).unwrap();
            assert_eq!(parse_icmp(s, d, &i).unwrap(), m);
            i[8] ^= 1;
            assert_eq!(parse_icmp(s, d, &i), Err(Error::Checksum("ICMP")));
        }
    }
}
