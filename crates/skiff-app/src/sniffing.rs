//! Sniffing on a connection's first bytes (an inbound's `sniffing`): read what the client
//! sends first, within Xray's bounds, ask the sniffers for a protocol and a name, and set
//! routing's view of the session (and, unless `routeOnly`, its destination). The bytes read
//! are handed back to be replayed in front of the stream, so nothing is lost.

use std::io;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use skiff_config::{SniffProtocol, SniffingPlan};
use skiff_core::{Address, BoxStream, Metadata};
use skiff_sniff::{Protocol, Sniff, Sniffed, sniff_any};
use tokio::io::AsyncReadExt;
use tokio::time::{Instant, timeout_at};
use tracing::debug;

/// How long the first bytes may take in all: Xray's dispatcher waits 200 ms (its
/// `cacheDeadline`) before routing without a sniffed name. A server-speaks-first protocol
/// costs this much once per connection, as in Xray.
pub const SNIFF_WAIT: Duration = Duration::from_millis(200);
/// Most bytes read for sniffing: a ClientHello with post-quantum key shares is about 2 KiB,
/// HTTP request heads rarely exceed a few; past this the name is not coming.
pub const SNIFF_BUFFER_LEN: usize = 16 * 1024;
/// Read size per attempt (so a slow sender costs no large buffer).
const READ_CHUNK: usize = 4096;

/// The TCP sniffers, in Xray's order.
const TCP_SNIFFERS: [Protocol; 2] = [Protocol::Http, Protocol::Tls];

/// Reads the client's first bytes from `stream` (at most [`SNIFF_BUFFER_LEN`], within
/// [`SNIFF_WAIT`]) and returns them with what the sniffers found. An end of stream or the
/// deadline just ends the sniff; a read error is the connection's end.
pub async fn sniff_stream(stream: &mut BoxStream) -> io::Result<(Bytes, Option<Sniffed>)> {
    let deadline = Instant::now() + SNIFF_WAIT;
    let mut buf = Vec::new();
    loop {
        let start = buf.len();
        buf.resize((start + READ_CHUNK).min(SNIFF_BUFFER_LEN), 0);
        let n = match timeout_at(deadline, stream.read(&mut buf[start..])).await {
            Ok(Ok(n)) => n,
            Ok(Err(e)) => return Err(e),
            Err(_) => 0,
        };
        buf.truncate(start + n);
        if n == 0 {
            return Ok((buf.into(), None));
        }
        match sniff_any(&buf, &TCP_SNIFFERS) {
            Sniff::Found(found) => return Ok((buf.into(), Some(found))),
            Sniff::NotThis => return Ok((buf.into(), None)),
            Sniff::NeedMore if buf.len() >= SNIFF_BUFFER_LEN => return Ok((buf.into(), None)),
            Sniff::NeedMore => {}
        }
    }
}

/// QUIC sniffing on the first datagram of a UDP session (the only one the data path looks
/// at before routing): the protocol and name feed routing; the datagrams keep the address
/// they were sent to, since the session's later datagrams may go elsewhere. A ClientHello
/// split over several Initial packets in separate datagrams (Chrome with post-quantum key
/// shares) is not seen whole here and names nothing.
pub fn sniff_first_datagram(plan: &SniffingPlan, payload: &[u8], meta: &mut Metadata) {
    if plan.metadata_only {
        return;
    }
    let Sniff::Found(found) = skiff_sniff::quic::sniff_quic(payload) else {
        return;
    };
    meta.protocol = Some(found.protocol.name());
    let Some(destination) = meta.destination.clone() else {
        return;
    };
    if should_override(plan, found.protocol, &found.domain, &destination) {
        meta.route_destination = Some(match found.domain.parse::<IpAddr>() {
            Ok(ip) => Address::Ip((ip, destination.port()).into()),
            Err(_) => Address::Domain(found.domain, destination.port()),
        });
    }
}

/// Applies a sniffed result to the session: the protocol (and HTTP attributes) for rules
/// always; the name for the destination only for `destOverride` protocols and names not
/// excluded. Returns the destination to connect to (the port is always the client's).
pub fn apply(
    plan: &SniffingPlan,
    found: Sniffed,
    meta: &mut Metadata,
    destination: Address,
) -> Address {
    meta.protocol = Some(found.protocol.name());
    if found.protocol == Protocol::Http {
        meta.attributes = Some(Arc::from(found.attributes));
    }
    if !should_override(plan, found.protocol, &found.domain, &destination) {
        return destination;
    }
    let sniffed = match found.domain.parse::<IpAddr>() {
        Ok(ip) => Address::Ip((ip, destination.port()).into()),
        Err(_) => Address::Domain(found.domain, destination.port()),
    };
    debug!(inbound = %meta.inbound_tag, sniffed = %sniffed, route_only = plan.route_only, "sniffed domain");
    if plan.route_only {
        meta.route_destination = Some(sniffed);
        destination
    } else {
        meta.requested_destination = Some(destination);
        sniffed
    }
}

fn should_override(
    plan: &SniffingPlan,
    protocol: Protocol,
    domain: &str,
    destination: &Address,
) -> bool {
    let wanted = match protocol {
        Protocol::Http => SniffProtocol::Http,
        Protocol::Tls => SniffProtocol::Tls,
        Protocol::Quic => SniffProtocol::Quic,
    };
    if domain.is_empty() || !plan.dest_override.contains(&wanted) {
        return false;
    }
    if let Some(excluded) = &plan.domains_excluded
        && excluded.matches(&domain.to_ascii_lowercase())
    {
        return false;
    }
    if let Some(ip) = destination.ip()
        && plan.ips_excluded.iter().any(|c| c.contains(ip))
    {
        return false;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use skiff_config::{Domain, DomainKind, DomainSet};
    use tokio::io::AsyncWriteExt;
    use tokio::net::UnixStream;

    fn plan(route_only: bool) -> SniffingPlan {
        SniffingPlan {
            dest_override: vec![SniffProtocol::Http, SniffProtocol::Tls],
            route_only,
            domains_excluded: Some(Arc::new(
                DomainSet::new([Domain {
                    kind: DomainKind::Suffix,
                    value: "skip.test".into(),
                }])
                .unwrap(),
            )),
            ..SniffingPlan::default()
        }
    }

    fn found(protocol: Protocol, domain: &str) -> Sniffed {
        Sniffed {
            protocol,
            domain: domain.into(),
            attributes: vec![(":method".into(), "GET".into())],
        }
    }

    fn meta() -> Metadata {
        Metadata::new(
            Arc::from("in"),
            "127.0.0.1:1".parse().unwrap(),
            "127.0.0.1:2".parse().unwrap(),
        )
    }

    #[test]
    fn override_route_only_and_exclusions() {
        let ip = Address::Ip("127.0.0.1:8443".parse().unwrap());
        let mut m = meta();
        let to = apply(
            &plan(false),
            found(Protocol::Tls, "a.example"),
            &mut m,
            ip.clone(),
        );
        assert_eq!(to, Address::Domain("a.example".into(), 8443));
        assert_eq!(m.requested_destination, Some(ip.clone()));
        assert_eq!(m.protocol, Some("tls"));
        assert!(m.attributes.is_none());

        let mut m = meta();
        let to = apply(
            &plan(true),
            found(Protocol::Http, "b.test"),
            &mut m,
            ip.clone(),
        );
        assert_eq!(to, ip);
        assert_eq!(
            m.route_destination,
            Some(Address::Domain("b.test".into(), 8443))
        );
        assert!(m.attributes.is_some());

        let mut m = meta();
        let to = apply(
            &plan(false),
            found(Protocol::Http, "x.skip.test"),
            &mut m,
            ip.clone(),
        );
        assert_eq!(to, ip);
        assert_eq!(m.protocol, Some("http"));
        // QUIC is not in destOverride: the protocol is recorded, the destination stays.
        let mut m = meta();
        assert_eq!(
            apply(
                &plan(false),
                found(Protocol::Quic, "q.example"),
                &mut m,
                ip.clone()
            ),
            ip
        );
        assert_eq!(m.protocol, Some("quic"));
    }

    #[test]
    fn first_datagram_names_the_quic_server_for_routing() {
        use skiff_sniff::quic::test_support::{crypto_frame, initial_packet};
        use skiff_sniff::tls::test_support::client_hello_message;
        let mut plan = plan(false);
        plan.dest_override.push(SniffProtocol::Quic);
        let hello = client_hello_message(Some("q.example"));
        let datagram = initial_packet(1, &[1; 8], 0, &crypto_frame(0, &hello));
        let mut m = meta();
        m.destination = Some(Address::Ip("127.0.0.1:443".parse().unwrap()));
        sniff_first_datagram(&plan, &datagram, &mut m);
        assert_eq!(m.protocol, Some("quic"));
        assert_eq!(
            m.route_destination,
            Some(Address::Domain("q.example".into(), 443))
        );
        let mut m = meta();
        m.destination = Some(Address::Ip("127.0.0.1:443".parse().unwrap()));
        sniff_first_datagram(&plan, b"not quic", &mut m);
        assert!(m.protocol.is_none() && m.route_destination.is_none());
    }

    #[tokio::test]
    async fn bytes_read_are_returned_and_silence_ends_the_sniff() {
        let (mut client, server) = UnixStream::pair().unwrap();
        let mut server: BoxStream = Box::new(server);
        client.write_all(b"GET / HTTP/1.1\r\nHo").await.unwrap();
        let reader = tokio::spawn(async move {
            let r = sniff_stream(&mut server).await.unwrap();
            (r, server)
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        client.write_all(b"st: B.test\r\n\r\n").await.unwrap();
        let ((bytes, found), _server) = reader.await.unwrap();
        assert_eq!(&bytes[..], b"GET / HTTP/1.1\r\nHost: B.test\r\n\r\n");
        assert_eq!(found.unwrap().domain, "b.test");

        // A client that says nothing: given up after the wait, nothing read.
        let (_client, server) = UnixStream::pair().unwrap();
        let mut server: BoxStream = Box::new(server);
        let started = std::time::Instant::now();
        let (bytes, found) = sniff_stream(&mut server).await.unwrap();
        assert!(bytes.is_empty() && found.is_none());
        assert!(started.elapsed() >= SNIFF_WAIT);
    }
}
