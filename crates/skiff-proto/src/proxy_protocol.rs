//! The HAProxy PROXY protocol, versions 1 (text) and 2 (binary), sans-IO.
//!
//! Source: HAProxy's `doc/proxy-protocol.txt` (§2.1 text format, §2.2 binary format), and
//! vless.md §6.3 for what Xray's fallbacks send (`xver` 1 and 2). Encoders build the header a
//! fallback writes before replaying the client's bytes; the parser is for accepting the
//! protocol on inbounds. IPv4-mapped IPv6 addresses are written as IPv4 (as Go-based peers
//! do), so a dual-stack listener still produces `TCP4` / `\x11` headers.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The 12-byte signature that starts every version 2 header.
pub const V2_SIGNATURE: [u8; 12] = [
    0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a,
];
/// The longest version 1 line, CRLF included (proxy-protocol.txt §2.1).
pub const V1_MAX_LEN: usize = 107;
/// The longest version 2 header the length field can describe.
pub const V2_MAX_LEN: usize = 16 + u16::MAX as usize;

const V1_PREFIX: &[u8] = b"PROXY ";

/// The result of parsing a prefix of the input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed<T> {
    /// A whole header (the value and its length in bytes).
    Complete(T),
    /// The input is a valid beginning of a header; more bytes are needed.
    Incomplete,
}

/// Why a PROXY header was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProxyProtocolError {
    /// The input starts with neither `PROXY ` nor the version 2 signature.
    NotProxyProtocol,
    /// A version 1 line without CRLF in its first 107 bytes.
    V1TooLong,
    /// A version 1 line that does not match the grammar.
    V1Malformed(&'static str),
    /// A version 2 header whose version nibble is not 2.
    V2BadVersion(u8),
    /// A version 2 command other than LOCAL (0) or PROXY (1).
    V2BadCommand(u8),
    /// A version 2 family/protocol byte outside the specified values.
    V2BadFamily(u8),
    /// A version 2 address block shorter than its family requires.
    V2AddressTooShort,
    /// A version 2 header longer than the caller's limit.
    V2TooLong(usize),
}

impl fmt::Display for ProxyProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProxyProtocolError::NotProxyProtocol => f.write_str("not a PROXY protocol header"),
            ProxyProtocolError::V1TooLong => {
                write!(f, "PROXY v1 line has no CRLF in {V1_MAX_LEN} bytes")
            }
            ProxyProtocolError::V1Malformed(why) => write!(f, "malformed PROXY v1 line: {why}"),
            ProxyProtocolError::V2BadVersion(v) => write!(f, "PROXY v2 bad version {v:#x}"),
            ProxyProtocolError::V2BadCommand(c) => write!(f, "PROXY v2 bad command {c:#x}"),
            ProxyProtocolError::V2BadFamily(b) => write!(f, "PROXY v2 bad family {b:#04x}"),
            ProxyProtocolError::V2AddressTooShort => {
                f.write_str("PROXY v2 address block too short for its family")
            }
            ProxyProtocolError::V2TooLong(n) => write!(f, "PROXY v2 header of {n} bytes too long"),
        }
    }
}

impl std::error::Error for ProxyProtocolError {}

/// Which protocol version a header used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProxyVersion {
    V1,
    V2,
}

/// The transport of the proxied connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProxyTransport {
    /// v1 UNKNOWN, v2 LOCAL or v2 UNSPEC.
    Unspecified,
    /// v1 TCP4/TCP6, v2 STREAM.
    Stream,
    /// v2 DGRAM.
    Datagram,
}

/// A parsed header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyHeader {
    pub version: ProxyVersion,
    /// v2 LOCAL: the proxy itself made the connection (health check); use the real endpoints.
    pub local: bool,
    pub transport: ProxyTransport,
    /// (source, destination) of the original connection; `None` means "use the real
    /// endpoints" (v1 UNKNOWN, v2 LOCAL, v2 AF_UNSPEC, v2 AF_UNIX which we do not represent).
    pub addresses: Option<(SocketAddr, SocketAddr)>,
}

/// IPv4-mapped IPv6 becomes IPv4.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        IpAddr::V4(_) => ip,
    }
}

/// Both addresses with the same family (after unmapping), or None when families differ.
fn same_family(source: SocketAddr, destination: SocketAddr) -> Option<(IpAddr, u16, IpAddr, u16)> {
    let (s, d) = (canonical(source.ip()), canonical(destination.ip()));
    (s.is_ipv4() == d.is_ipv4()).then_some((s, source.port(), d, destination.port()))
}

/// Appends `PROXY UNKNOWN\r\n`.
pub fn encode_v1_unknown(out: &mut Vec<u8>) {
    out.extend_from_slice(b"PROXY UNKNOWN\r\n");
}

/// Appends a version 1 line: `PROXY TCP4|TCP6 src dst sport dport\r\n`, or
/// `PROXY UNKNOWN\r\n` when the two addresses have different families.
pub fn encode_v1(source: SocketAddr, destination: SocketAddr, out: &mut Vec<u8>) {
    match same_family(source, destination) {
        None => encode_v1_unknown(out),
        Some((s, sp, d, dp)) => {
            let proto = if s.is_ipv4() { "TCP4" } else { "TCP6" };
            // Rust prints IPv6 as RFC 5952 hex groups (only IPv4-mapped addresses get a
            // dotted tail, and those were turned into IPv4 above).
            let line = format!("PROXY {proto} {s} {d} {sp} {dp}\r\n");
            out.extend_from_slice(line.as_bytes());
        }
    }
}

/// Appends the version 2 LOCAL header `sig 20 00 0000`.
pub fn encode_v2_local(out: &mut Vec<u8>) {
    out.extend_from_slice(&V2_SIGNATURE);
    out.extend_from_slice(&[0x20, 0x00, 0x00, 0x00]);
}

/// Appends a version 2 PROXY header for a TCP connection (`21 11 000c …` or `21 21 0024 …`),
/// or a LOCAL header when the two addresses have different families. No TLVs are written.
pub fn encode_v2(source: SocketAddr, destination: SocketAddr, out: &mut Vec<u8>) {
    out.extend_from_slice(&V2_SIGNATURE);
    match same_family(source, destination) {
        None => out.extend_from_slice(&[0x20, 0x00, 0x00, 0x00]),
        Some((IpAddr::V4(s), sp, IpAddr::V4(d), dp)) => {
            out.extend_from_slice(&[0x21, 0x11, 0x00, 12]);
            out.extend_from_slice(&s.octets());
            out.extend_from_slice(&d.octets());
            out.extend_from_slice(&sp.to_be_bytes());
            out.extend_from_slice(&dp.to_be_bytes());
        }
        Some((s, sp, d, dp)) => {
            out.extend_from_slice(&[0x21, 0x21, 0x00, 36]);
            out.extend_from_slice(&v6_octets(s));
            out.extend_from_slice(&v6_octets(d));
            out.extend_from_slice(&sp.to_be_bytes());
            out.extend_from_slice(&dp.to_be_bytes());
        }
    }
}

fn v6_octets(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V6(v6) => v6.octets(),
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
    }
}

/// Appends the header Xray's fallback `xver` selects: 1 → v1, 2 → v2, anything else nothing.
/// `addresses` = (remote, local) of the accepted connection, `None` when unavailable.
pub fn encode_xver(xver: u8, addresses: Option<(SocketAddr, SocketAddr)>, out: &mut Vec<u8>) {
    match (xver, addresses) {
        (1, Some((s, d))) => encode_v1(s, d, out),
        (1, None) => encode_v1_unknown(out),
        (2, Some((s, d))) => encode_v2(s, d, out),
        (2, None) => encode_v2_local(out),
        _ => {}
    }
}

/// Parses a version 1 or 2 header at the start of `buf`; returns it and its length (the
/// proxied data follows). Version 2 headers may be up to [`V2_MAX_LEN`] bytes.
pub fn parse(buf: &[u8]) -> Result<Parsed<(ProxyHeader, usize)>, ProxyProtocolError> {
    parse_with_limit(buf, V2_MAX_LEN)
}

/// Like [`parse`], refusing version 2 headers longer than `max_v2_len` bytes in total.
pub fn parse_with_limit(
    buf: &[u8],
    max_v2_len: usize,
) -> Result<Parsed<(ProxyHeader, usize)>, ProxyProtocolError> {
    let Some(&first) = buf.first() else {
        return Ok(Parsed::Incomplete);
    };
    let (signature, v2): (&[u8], bool) = match first {
        b'P' => (V1_PREFIX, false),
        0x0d => (&V2_SIGNATURE, true),
        _ => return Err(ProxyProtocolError::NotProxyProtocol),
    };
    let n = buf.len().min(signature.len());
    if buf[..n] != signature[..n] {
        return Err(ProxyProtocolError::NotProxyProtocol);
    }
    if v2 {
        parse_v2(buf, max_v2_len)
    } else {
        parse_v1(buf)
    }
}

fn parse_v1(buf: &[u8]) -> Result<Parsed<(ProxyHeader, usize)>, ProxyProtocolError> {
    use ProxyProtocolError::V1Malformed;
    let window = &buf[..buf.len().min(V1_MAX_LEN)];
    // Any CR or LF ends the line: it must be CRLF (a lone CR or LF is refused).
    let Some(end) = window.iter().position(|&c| c == b'\r' || c == b'\n') else {
        return if buf.len() >= V1_MAX_LEN {
            Err(ProxyProtocolError::V1TooLong)
        } else {
            Ok(Parsed::Incomplete)
        };
    };
    if window[end] != b'\r' {
        return Err(V1Malformed("line not ended by CRLF"));
    }
    if end + 2 > V1_MAX_LEN {
        return Err(ProxyProtocolError::V1TooLong);
    }
    match buf.get(end + 1) {
        None => return Ok(Parsed::Incomplete),
        Some(b'\n') => {}
        Some(_) => return Err(V1Malformed("line not ended by CRLF")),
    }
    let len = end + 2;
    let line =
        std::str::from_utf8(&buf[V1_PREFIX.len()..end]).map_err(|_| V1Malformed("not ASCII"))?;
    let unknown = ProxyHeader {
        version: ProxyVersion::V1,
        local: false,
        transport: ProxyTransport::Unspecified,
        addresses: None,
    };
    // "UNKNOWN" alone, or followed by anything (ignored) after a space.
    if line == "UNKNOWN" || line.starts_with("UNKNOWN ") {
        return Ok(Parsed::Complete((unknown, len)));
    }
    let mut fields = line.split(' ');
    let proto = fields.next().unwrap_or("");
    let v6 = match proto {
        "TCP4" => false,
        "TCP6" => true,
        _ => return Err(V1Malformed("unknown protocol")),
    };
    let (Some(src), Some(dst), Some(sport), Some(dport), None) = (
        fields.next(),
        fields.next(),
        fields.next(),
        fields.next(),
        fields.next(),
    ) else {
        return Err(V1Malformed("wrong number of fields"));
    };
    let parse_ip = |text: &str| -> Result<IpAddr, ProxyProtocolError> {
        if v6 {
            text.parse::<Ipv6Addr>()
                .map(IpAddr::V6)
                .map_err(|_| V1Malformed("bad IPv6 address"))
        } else {
            // Rust's IPv4 parser refuses leading zeros, as the spec requires.
            text.parse::<Ipv4Addr>()
                .map(IpAddr::V4)
                .map_err(|_| V1Malformed("bad IPv4 address"))
        }
    };
    let header = ProxyHeader {
        version: ProxyVersion::V1,
        local: false,
        transport: ProxyTransport::Stream,
        addresses: Some((
            SocketAddr::new(parse_ip(src)?, parse_port(sport)?),
            SocketAddr::new(parse_ip(dst)?, parse_port(dport)?),
        )),
    };
    Ok(Parsed::Complete((header, len)))
}

/// A decimal port in 0..=65535 without leading zeros.
fn parse_port(text: &str) -> Result<u16, ProxyProtocolError> {
    let ok = !text.is_empty()
        && text.len() <= 5
        && text.bytes().all(|c| c.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'));
    if !ok {
        return Err(ProxyProtocolError::V1Malformed("bad port"));
    }
    text.parse()
        .map_err(|_| ProxyProtocolError::V1Malformed("bad port"))
}

fn parse_v2(
    buf: &[u8],
    max_len: usize,
) -> Result<Parsed<(ProxyHeader, usize)>, ProxyProtocolError> {
    // Check what we can as soon as the bytes are there.
    if let Some(&ver_cmd) = buf.get(12) {
        if ver_cmd >> 4 != 2 {
            return Err(ProxyProtocolError::V2BadVersion(ver_cmd >> 4));
        }
        if ver_cmd & 0x0f > 1 {
            return Err(ProxyProtocolError::V2BadCommand(ver_cmd & 0x0f));
        }
    }
    if let Some(&fam) = buf.get(13)
        && (fam >> 4 > 3 || fam & 0x0f > 2)
    {
        return Err(ProxyProtocolError::V2BadFamily(fam));
    }
    let Some(len_bytes) = buf.get(14..16) else {
        return Ok(Parsed::Incomplete);
    };
    let total = 16 + usize::from(u16::from_be_bytes([len_bytes[0], len_bytes[1]]));
    if total > max_len {
        return Err(ProxyProtocolError::V2TooLong(total));
    }
    let Some(block) = buf.get(16..total) else {
        return Ok(Parsed::Incomplete);
    };
    let (ver_cmd, fam) = (buf[12], buf[13]);
    let local = ver_cmd & 0x0f == 0;
    let transport = match fam & 0x0f {
        1 => ProxyTransport::Stream,
        2 => ProxyTransport::Datagram,
        _ => ProxyTransport::Unspecified,
    };
    let address_len = match fam >> 4 {
        1 => 12,
        2 => 36,
        3 => 216,
        _ => 0,
    };
    if !local && block.len() < address_len {
        return Err(ProxyProtocolError::V2AddressTooShort);
    }
    // LOCAL: the family and any address are ignored. UNSPEC protocol: addresses ignored.
    let addresses = if local || transport == ProxyTransport::Unspecified {
        None
    } else {
        match fam >> 4 {
            1 => {
                let ip = |at: usize| {
                    Ipv4Addr::new(block[at], block[at + 1], block[at + 2], block[at + 3])
                };
                let port = |at: usize| u16::from_be_bytes([block[at], block[at + 1]]);
                Some((
                    SocketAddr::new(IpAddr::V4(ip(0)), port(8)),
                    SocketAddr::new(IpAddr::V4(ip(4)), port(10)),
                ))
            }
            2 => {
                let ip = |at: usize| {
                    let mut octets = [0u8; 16];
                    octets.copy_from_slice(&block[at..at + 16]);
                    Ipv6Addr::from(octets)
                };
                let port = |at: usize| u16::from_be_bytes([block[at], block[at + 1]]);
                Some((
                    SocketAddr::new(IpAddr::V6(ip(0)), port(32)),
                    SocketAddr::new(IpAddr::V6(ip(16)), port(34)),
                ))
            }
            // AF_UNSPEC or AF_UNIX: nothing we can represent as a socket address.
            _ => None,
        }
    };
    // Anything after the addresses is TLVs, skipped with the rest of the block.
    let header = ProxyHeader {
        version: ProxyVersion::V2,
        local,
        transport: if local {
            ProxyTransport::Unspecified
        } else {
            transport
        },
        addresses,
    };
    Ok(Parsed::Complete((header, total)))
}

/// Fuzz entry point: runs the parser on arbitrary bytes and checks that a header with
/// addresses re-encodes (v1: TCP only) to something that parses to the same addresses.
pub fn fuzz_parse_all(data: &[u8]) {
    let _ = parse_with_limit(data, 536);
    if let Ok(Parsed::Complete((header, len))) = parse(data) {
        assert!(len <= data.len());
        if let Some((s, d)) = header.addresses {
            let mut out = Vec::new();
            encode_v2(s, d, &mut out);
            let Ok(Parsed::Complete((again, again_len))) = parse(&out) else {
                panic!("re-encoded v2 header does not parse");
            };
            assert_eq!(again_len, out.len());
            let canon = |a: SocketAddr| SocketAddr::new(canonical(a.ip()), a.port());
            if let Some((s2, d2)) = again.addresses {
                assert_eq!((canon(s), canon(d)), (canon(s2), canon(d2)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn complete(buf: &[u8]) -> (ProxyHeader, usize) {
        match parse(buf) {
            Ok(Parsed::Complete(v)) => v,
            other => panic!("{other:?} for {buf:?}"),
        }
    }

    fn proxied(version: ProxyVersion, transport: ProxyTransport, s: &str, d: &str) -> ProxyHeader {
        ProxyHeader {
            version,
            local: false,
            transport,
            addresses: Some((sa(s), sa(d))),
        }
    }

    const V1_UNKNOWN: ProxyHeader = ProxyHeader {
        version: ProxyVersion::V1,
        local: false,
        transport: ProxyTransport::Unspecified,
        addresses: None,
    };
    const V2_LOCAL: ProxyHeader = ProxyHeader {
        version: ProxyVersion::V2,
        local: true,
        transport: ProxyTransport::Unspecified,
        addresses: None,
    };

    /// Checks that every strict prefix is Incomplete.
    fn prefixes_incomplete(wire: &[u8]) {
        for cut in 0..wire.len() {
            assert_eq!(parse(&wire[..cut]), Ok(Parsed::Incomplete), "cut {cut}");
        }
    }

    #[test]
    fn v1_haproxy_example() {
        // proxy-protocol.txt §2.1, the example line before an HTTP request.
        let line = b"PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n";
        let mut out = Vec::new();
        encode_v1(sa("192.168.0.1:56324"), sa("192.168.0.11:443"), &mut out);
        assert_eq!(out, line);
        let mut wire = line.to_vec();
        wire.extend_from_slice(b"GET / HTTP/1.1\r\n");
        assert_eq!(
            complete(&wire),
            (
                proxied(
                    ProxyVersion::V1,
                    ProxyTransport::Stream,
                    "192.168.0.1:56324",
                    "192.168.0.11:443"
                ),
                line.len()
            )
        );
        prefixes_incomplete(line);
    }

    #[test]
    fn v1_xray_live_vector() {
        // vless.md §6.3, live v1 from an Xray fallback.
        let line = b"PROXY TCP4 127.0.0.1 127.0.0.1 36166 20001\r\n";
        let mut out = Vec::new();
        encode_xver(
            1,
            Some((sa("127.0.0.1:36166"), sa("127.0.0.1:20001"))),
            &mut out,
        );
        assert_eq!(out, line);
        // Dual-stack listeners report IPv4-mapped addresses; still TCP4.
        out.clear();
        encode_v1(
            sa("[::ffff:127.0.0.1]:36166"),
            sa("[::ffff:127.0.0.1]:20001"),
            &mut out,
        );
        assert_eq!(out, line);
        assert_eq!(complete(line).1, line.len());
    }

    #[test]
    fn v1_lengths_from_the_spec() {
        // proxy-protocol.txt §2.1 "maximum line lengths": 56, 104, 15 and 107 bytes.
        let tcp4 = b"PROXY TCP4 255.255.255.255 255.255.255.255 65535 65535\r\n";
        assert_eq!(tcp4.len(), 56);
        assert_eq!(
            complete(tcp4),
            (
                proxied(
                    ProxyVersion::V1,
                    ProxyTransport::Stream,
                    "255.255.255.255:65535",
                    "255.255.255.255:65535"
                ),
                56
            )
        );
        let f = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff";
        let tcp6 = format!("PROXY TCP6 {f} {f} 65535 65535\r\n");
        assert_eq!(tcp6.len(), 104);
        let (header, len) = complete(tcp6.as_bytes());
        assert_eq!(len, 104);
        let all = SocketAddr::new(IpAddr::V6(Ipv6Addr::from([0xff; 16])), 65535);
        assert_eq!(header.addresses, Some((all, all)));
        let mut out = Vec::new();
        encode_v1(all, all, &mut out);
        assert_eq!(out, tcp6.as_bytes());

        let unknown = b"PROXY UNKNOWN\r\n";
        assert_eq!(unknown.len(), 15);
        assert_eq!(complete(unknown), (V1_UNKNOWN, 15));
        out.clear();
        encode_v1_unknown(&mut out);
        assert_eq!(out, unknown);
        prefixes_incomplete(unknown);

        let worst = format!("PROXY UNKNOWN {f} {f} 65535 65535\r\n");
        assert_eq!(worst.len(), 107);
        assert_eq!(complete(worst.as_bytes()), (V1_UNKNOWN, 107));
        prefixes_incomplete(worst.as_bytes());
        // One byte more: no CRLF within the first 107 bytes.
        let over = format!("PROXY UNKNOWN {f} {f} 65535 655350\r\n");
        assert_eq!(parse(over.as_bytes()), Err(ProxyProtocolError::V1TooLong));
        assert_eq!(
            parse(&over.as_bytes()[..107]),
            Err(ProxyProtocolError::V1TooLong)
        );
        assert_eq!(parse(&over.as_bytes()[..106]), Ok(Parsed::Incomplete));
    }

    #[test]
    fn v1_mixed_families_are_unknown() {
        let mut out = Vec::new();
        encode_v1(sa("1.2.3.4:1"), sa("[::1]:2"), &mut out);
        assert_eq!(out, b"PROXY UNKNOWN\r\n");
        out.clear();
        encode_xver(1, None, &mut out);
        assert_eq!(out, b"PROXY UNKNOWN\r\n");
        out.clear();
        encode_xver(0, Some((sa("1.2.3.4:1"), sa("1.2.3.4:2"))), &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn v1_ipv6() {
        let line = b"PROXY TCP6 2001:db8::1 ::1 443 8443\r\n";
        let mut out = Vec::new();
        encode_v1(sa("[2001:db8::1]:443"), sa("[::1]:8443"), &mut out);
        assert_eq!(out, line);
        assert_eq!(
            complete(line).0,
            proxied(
                ProxyVersion::V1,
                ProxyTransport::Stream,
                "[2001:db8::1]:443",
                "[::1]:8443"
            )
        );
    }

    #[test]
    fn v1_rejects_what_the_spec_forbids() {
        use ProxyProtocolError::*;
        for (line, why) in [
            (&b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n"[..], "lone LF"),
            (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\rX", "lone CR"),
            (b"PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n", "leading zero port"),
            (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 65536\r\n", "port range"),
            (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 -2\r\n", "signed port"),
            (
                b"PROXY TCP4 1.2.3.04 5.6.7.8 1 2\r\n",
                "leading zero in IPv4",
            ),
            (b"PROXY TCP4 ::1 ::1 1 2\r\n", "IPv6 in TCP4"),
            (b"PROXY TCP6 1.2.3.4 5.6.7.8 1 2\r\n", "IPv4 in TCP6"),
            (b"PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n", "double space"),
            (b"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n", "missing field"),
            (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n", "extra field"),
            (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n", "trailing space"),
            (b"PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n", "unknown protocol"),
            (b"PROXY UNKNOWNX\r\n", "unknown protocol"),
            (b"PROXY \r\n", "empty"),
            (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 \xff\r\n", "non-ASCII"),
        ] {
            assert!(matches!(parse(line), Err(V1Malformed(_))), "{why}");
        }
        assert_eq!(parse(b"PROXX"), Err(NotProxyProtocol));
        assert_eq!(parse(b"proxy TCP4"), Err(NotProxyProtocol));
        assert_eq!(parse(b"GET / HTTP/1.1\r\n"), Err(NotProxyProtocol));
        assert_eq!(parse(b"PROX"), Ok(Parsed::Incomplete));
        assert_eq!(parse(b""), Ok(Parsed::Incomplete));
        // Port 0 is allowed; UNKNOWN ignores the rest of the line.
        assert!(parse(b"PROXY TCP4 1.2.3.4 5.6.7.8 0 0\r\n").is_ok());
        assert_eq!(complete(b"PROXY UNKNOWN whatever 1 2\r\n").0, V1_UNKNOWN);
    }

    #[test]
    fn v2_xray_live_vector() {
        // vless.md §6.3, live v2 from an Xray fallback.
        let wire = hex("0d0a0d0a000d0a515549540a 21 11 000c 7f000001 7f000001 b854 4e21");
        let mut out = Vec::new();
        encode_xver(
            2,
            Some((sa("127.0.0.1:47188"), sa("127.0.0.1:20001"))),
            &mut out,
        );
        assert_eq!(out, wire);
        let mut with_data = wire.clone();
        with_data.extend_from_slice(b"GET /");
        assert_eq!(
            complete(&with_data),
            (
                proxied(
                    ProxyVersion::V2,
                    ProxyTransport::Stream,
                    "127.0.0.1:47188",
                    "127.0.0.1:20001"
                ),
                28
            )
        );
        prefixes_incomplete(&wire);
    }

    #[test]
    fn v2_ipv6_and_local() {
        // Layout from proxy-protocol.txt §2.2: \x21 = PROXY, \x21 = TCP over IPv6, 36 bytes.
        let wire = hex("0d0a0d0a000d0a515549540a 21 21 0024 \
             20010db8000000000000000000000001 00000000000000000000000000000001 01bb 20fb");
        let mut out = Vec::new();
        encode_v2(sa("[2001:db8::1]:443"), sa("[::1]:8443"), &mut out);
        assert_eq!(out, wire);
        assert_eq!(
            complete(&wire),
            (
                proxied(
                    ProxyVersion::V2,
                    ProxyTransport::Stream,
                    "[2001:db8::1]:443",
                    "[::1]:8443"
                ),
                52
            )
        );
        prefixes_incomplete(&wire);

        // LOCAL: vless.md §6.3 `20 00 0000`; also used for mixed families.
        let local = hex("0d0a0d0a000d0a515549540a 20 00 0000");
        out.clear();
        encode_xver(2, None, &mut out);
        assert_eq!(out, local);
        out.clear();
        encode_v2(sa("1.2.3.4:1"), sa("[2001:db8::1]:2"), &mut out);
        assert_eq!(out, local);
        assert_eq!(complete(&local), (V2_LOCAL, 16));
        // LOCAL with an address block: the receiver must skip `len` bytes and ignore it.
        let local_addr = hex("0d0a0d0a000d0a515549540a 20 11 000c 7f000001 7f000001 b854 4e21 ff");
        assert_eq!(complete(&local_addr), (V2_LOCAL, 28));
    }

    #[test]
    fn v2_families_tlvs_and_limits() {
        use ProxyProtocolError::*;
        let sig = "0d0a0d0a000d0a515549540a";
        // UDP over IPv4 (\x12) with a TLV (PP2_TYPE_ALPN = 0x01, "h2") after the addresses.
        let udp = hex(&format!(
            "{sig} 21 12 0011 0a000001 0a000002 0035 0035 01 0002 6832"
        ));
        assert_eq!(
            complete(&udp),
            (
                proxied(
                    ProxyVersion::V2,
                    ProxyTransport::Datagram,
                    "10.0.0.1:53",
                    "10.0.0.2:53"
                ),
                33
            )
        );
        // AF_UNSPEC with PROXY, and AF_UNIX (216 bytes): no socket addresses.
        let unspec = hex(&format!("{sig} 21 00 0000"));
        let (header, len) = complete(&unspec);
        assert_eq!((header.addresses, header.local, len), (None, false, 16));
        let mut unix = hex(&format!("{sig} 21 31 00d8"));
        unix.extend_from_slice(&[b'/'; 216]);
        let (header, len) = complete(&unix);
        assert_eq!(
            (header.addresses, header.transport, len),
            (None, ProxyTransport::Stream, 232)
        );

        assert_eq!(parse(&hex(&format!("{sig} 11 11"))), Err(V2BadVersion(1)));
        assert_eq!(parse(&hex(&format!("{sig} 22"))), Err(V2BadCommand(2)));
        assert_eq!(parse(&hex(&format!("{sig} 21 41"))), Err(V2BadFamily(0x41)));
        assert_eq!(parse(&hex(&format!("{sig} 21 13"))), Err(V2BadFamily(0x13)));
        assert_eq!(
            parse(&hex(&format!("{sig} 21 11 0004 01020304"))),
            Err(V2AddressTooShort)
        );
        assert_eq!(
            parse(&hex(&format!(
                "{sig} 21 21 000c 7f000001 7f000001 b854 4e21"
            ))),
            Err(V2AddressTooShort)
        );
        assert_eq!(
            parse(&hex("0d0a0d0a000d0a5155495400")),
            Err(NotProxyProtocol)
        );
        assert_eq!(parse(&hex("0d0a0d")), Ok(Parsed::Incomplete));
        // Maximal length: incomplete until all 65535 bytes are there; a limit refuses early.
        let big = hex(&format!("{sig} 21 11 ffff"));
        assert_eq!(parse(&big), Ok(Parsed::Incomplete));
        assert_eq!(parse_with_limit(&big, 536), Err(V2TooLong(V2_MAX_LEN)));
        let mut full = big.clone();
        full.resize(V2_MAX_LEN, 0);
        assert_eq!(complete(&full).1, V2_MAX_LEN);
    }

    fn canon(a: SocketAddr) -> SocketAddr {
        SocketAddr::new(canonical(a.ip()), a.port())
    }

    fn arb_sa() -> impl Strategy<Value = SocketAddr> {
        prop_oneof![
            (any::<IpAddr>(), any::<u16>()).prop_map(|(ip, p)| SocketAddr::new(ip, p)),
            (any::<Ipv4Addr>(), any::<u16>())
                .prop_map(|(ip, p)| SocketAddr::new(IpAddr::V6(ip.to_ipv6_mapped()), p)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            fuzz_parse_all(&data);
        }

        #[test]
        fn arbitrary_after_signatures_never_panic(
            v2 in any::<bool>(),
            tail in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            let mut data = if v2 { V2_SIGNATURE.to_vec() } else { b"PROXY ".to_vec() };
            data.extend_from_slice(&tail);
            fuzz_parse_all(&data);
        }

        #[test]
        fn encode_parse_roundtrip(s in arb_sa(), d in arb_sa(), payload in proptest::collection::vec(any::<u8>(), 0..8)) {
            let same = canon(s).is_ipv4() == canon(d).is_ipv4();
            for v2 in [false, true] {
                let mut wire = Vec::new();
                if v2 { encode_v2(s, d, &mut wire) } else { encode_v1(s, d, &mut wire) }
                let len = wire.len();
                prop_assert!(v2 || len <= V1_MAX_LEN);
                if !v2 && wire.starts_with(b"PROXY TCP6") {
                    // Hex groups only, as proxy-protocol.txt §2.1 requires (no dotted tail).
                    prop_assert!(!wire.contains(&b'.'));
                }
                wire.extend_from_slice(&payload);
                let (header, parsed_len) = complete(&wire);
                prop_assert_eq!(parsed_len, len);
                let version = if v2 { ProxyVersion::V2 } else { ProxyVersion::V1 };
                prop_assert_eq!(header.version, version);
                if same {
                    prop_assert_eq!(header.addresses, Some((canon(s), canon(d))));
                    prop_assert_eq!(header.transport, ProxyTransport::Stream);
                } else {
                    prop_assert_eq!(header.addresses, None);
                    prop_assert_eq!(header.local, v2);
                }
                for cut in 0..len {
                    prop_assert_eq!(parse(&wire[..cut]), Ok(Parsed::Incomplete));
                }
            }
        }
    }
}
