//! The DNS messages skiff sends and reads: one A or AAAA question out, the addresses of its
//! answer back. Sans-IO: bytes in, bytes out; hickory-proto does the wire format.

use std::net::IpAddr;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::opt::{ClientSubnet, EdnsOption};
use hickory_proto::rr::{Name, RData, RecordType};

use crate::error::DnsError;

/// The largest DNS message (its length travels in 16 bits over TCP).
pub const MAX_MESSAGE: usize = 65_535;

/// What we advertise over UDP: the DNS flag day's 1232 bytes, safe from fragmentation.
pub const UDP_PAYLOAD: u16 = 1232;

/// An A or AAAA question for one name.
#[derive(Clone, Debug)]
pub struct Question {
    name: Name,
    v6: bool,
}

impl Question {
    /// `name` may be Unicode (it is IDNA-encoded) and may end with a dot.
    pub fn new(name: &str, v6: bool) -> Result<Question, DnsError> {
        let mut parsed = Name::from_utf8(name).map_err(|_| DnsError::BadName(name.to_owned()))?;
        if parsed.num_labels() == 0 {
            return Err(DnsError::BadName(name.to_owned()));
        }
        parsed.set_fqdn(true);
        Ok(Question { name: parsed, v6 })
    }

    fn record_type(&self) -> RecordType {
        if self.v6 {
            RecordType::AAAA
        } else {
            RecordType::A
        }
    }

    /// The query message. ECS carries `client_ip` with Xray's prefixes (/24, /96).
    pub fn encode(&self, id: u16, client_ip: Option<IpAddr>) -> Result<Vec<u8>, DnsError> {
        let mut message = Message::new(id, MessageType::Query, OpCode::Query);
        message.metadata.recursion_desired = true;
        message.add_query(Query::query(self.name.clone(), self.record_type()));
        let mut edns = Edns::new();
        edns.set_max_payload(UDP_PAYLOAD);
        if let Some(ip) = client_ip {
            let prefix = if ip.is_ipv4() { 24 } else { 96 };
            edns.options_mut()
                .insert(EdnsOption::Subnet(ClientSubnet::new(ip, prefix, 0)));
        }
        message.set_edns(edns);
        message
            .to_vec()
            .map_err(|e| DnsError::Malformed(format!("cannot encode the query: {e}")))
    }

    /// Reads a reply to the query with transaction `id`.
    pub fn decode(&self, id: u16, bytes: &[u8]) -> Result<Reply, DnsError> {
        if bytes.len() > MAX_MESSAGE {
            return Err(DnsError::TooLarge(bytes.len()));
        }
        // The id first: a datagram for another transaction is dropped, not an error of ours.
        let got =
            reply_id(bytes).ok_or_else(|| DnsError::Malformed("shorter than a header".into()))?;
        if got != id {
            return Err(DnsError::WrongId { sent: id, got });
        }
        let message = Message::from_vec(bytes).map_err(|e| DnsError::Malformed(e.to_string()))?;
        if message.metadata.message_type != MessageType::Response {
            return Err(DnsError::NotOurReply("the QR bit is not set"));
        }
        if message.metadata.truncation {
            return Ok(Reply::Truncated);
        }
        match message.queries.as_slice() {
            [q] if q.name() == &self.name && q.query_type() == self.record_type() => {}
            _ => return Err(DnsError::NotOurReply("it answers another question")),
        }
        let rcode = message.metadata.response_code;
        if rcode == ResponseCode::NXDomain {
            return Ok(Reply::Answer(Answer::default()));
        }
        if rcode != ResponseCode::NoError {
            return Err(DnsError::Rcode(rcode.to_string()));
        }
        Ok(Reply::Answer(self.addresses(&message)))
    }

    /// The addresses of the question's name, following CNAMEs from it (never the records of
    /// names the chain does not reach: a server cannot slip in addresses for other names).
    fn addresses(&self, message: &Message) -> Answer {
        let mut names = vec![self.name.clone()];
        let mut ttl = u32::MAX;
        // Each pass adds at least one name or stops, so this ends after at most
        // `answers.len()` passes.
        for _ in 0..message.answers.len() {
            let mut grew = false;
            for record in &message.answers {
                if let RData::CNAME(target) = &record.data
                    && names.contains(&record.name)
                    && !names.contains(&target.0)
                {
                    names.push(target.0.clone());
                    ttl = ttl.min(record.ttl);
                    grew = true;
                }
            }
            if !grew {
                break;
            }
        }
        let wanted = self.record_type();
        let mut ips = Vec::new();
        for record in &message.answers {
            if record.record_type() == wanted
                && names.contains(&record.name)
                && let Some(ip) = record.data.ip_addr()
            {
                ttl = ttl.min(record.ttl);
                if !ips.contains(&ip) {
                    ips.push(ip);
                }
            }
        }
        if ips.is_empty() {
            ttl = negative_ttl(message);
        }
        Answer { ips, ttl }
    }
}

/// How long "no such address" may be kept (RFC 2308): the SOA's TTL, at most its minimum;
/// 0 (not kept) without an SOA.
fn negative_ttl(message: &Message) -> u32 {
    message
        .authorities
        .iter()
        .find_map(|r| match &r.data {
            RData::SOA(soa) => Some(r.ttl.min(soa.minimum)),
            _ => None,
        })
        .unwrap_or(0)
}

/// The transaction id of a message, if it has a header at all.
pub fn reply_id(bytes: &[u8]) -> Option<u16> {
    Some(u16::from_be_bytes([*bytes.first()?, *bytes.get(1)?]))
}

#[derive(Debug)]
pub enum Reply {
    Answer(Answer),
    /// The TC bit: ask again over TCP.
    Truncated,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Answer {
    pub ips: Vec<IpAddr>,
    /// The smallest TTL among the records used, in seconds.
    pub ttl: u32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::Record;
    use hickory_proto::rr::rdata::{A, AAAA, CNAME, SOA};

    fn reply_to(query: &[u8], build: impl FnOnce(&mut Message, &Name)) -> Vec<u8> {
        let q = Message::from_vec(query).unwrap();
        let mut m = Message::response(q.metadata.id, OpCode::Query);
        m.add_queries(q.queries.clone());
        let name = q.queries[0].name().clone();
        build(&mut m, &name);
        m.to_vec().unwrap()
    }

    #[test]
    fn a_reply_with_a_cname_chain() {
        let q = Question::new("WWW.Example.com.", false).unwrap();
        let bytes = q.encode(7, Some("198.51.100.9".parse().unwrap())).unwrap();
        let parsed = Message::from_vec(&bytes).unwrap();
        assert!(
            parsed
                .edns
                .unwrap()
                .option(hickory_proto::rr::rdata::opt::EdnsCode::Subnet)
                .is_some()
        );
        let reply = reply_to(&bytes, |m, name| {
            let alias = Name::from_ascii("cdn.example.net.").unwrap();
            m.add_answer(Record::from_rdata(
                name.clone(),
                300,
                RData::CNAME(CNAME(alias.clone())),
            ));
            m.add_answer(Record::from_rdata(
                alias,
                60,
                RData::A(A::new(192, 0, 2, 1)),
            ));
            // Not reached from the question: ignored.
            let other = Name::from_ascii("evil.example.").unwrap();
            m.add_answer(Record::from_rdata(other, 60, RData::A(A::new(6, 6, 6, 6))));
            m.add_answer(Record::from_rdata(
                name.clone(),
                60,
                RData::AAAA(AAAA::new(0, 0, 0, 0, 0, 0, 0, 1)),
            ));
        });
        let Reply::Answer(a) = q.decode(7, &reply).unwrap() else {
            panic!()
        };
        assert_eq!(a.ips, vec!["192.0.2.1".parse::<IpAddr>().unwrap()]);
        assert_eq!(a.ttl, 60);
    }

    #[test]
    fn bad_replies_are_errors_not_panics() {
        let q = Question::new("example.com", false).unwrap();
        let query = q.encode(9, None).unwrap();
        assert!(matches!(q.decode(9, &[]), Err(DnsError::Malformed(_))));
        assert!(matches!(
            q.decode(9, b"\x00\x09garbage"),
            Err(DnsError::Malformed(_))
        ));
        assert!(matches!(
            q.decode(8, &query),
            Err(DnsError::WrongId { sent: 8, got: 9 })
        ));
        // Our own query echoed back is not a reply.
        assert!(matches!(q.decode(9, &query), Err(DnsError::NotOurReply(_))));
        let good = reply_to(&query, |m, name| {
            m.add_answer(Record::from_rdata(
                name.clone(),
                5,
                RData::A(A::new(1, 2, 3, 4)),
            ));
        });
        // Every prefix of a good reply is refused cleanly.
        for len in 0..good.len() {
            assert!(q.decode(9, &good[..len]).is_err(), "prefix {len}");
        }
        let other = Question::new("example.org", false).unwrap();
        assert!(matches!(
            other.decode(9, &good),
            Err(DnsError::NotOurReply(_))
        ));
        assert!(matches!(
            q.decode(9, &vec![0; MAX_MESSAGE + 1]),
            Err(DnsError::TooLarge(_))
        ));
        assert!(matches!(
            q.decode(9, &compression_loop(9)),
            Err(DnsError::Malformed(_))
        ));
    }

    /// A reply whose answer name is a compression pointer to itself.
    pub(crate) fn compression_loop(id: u16) -> Vec<u8> {
        let mut m = id.to_be_bytes().to_vec();
        m.extend_from_slice(&[0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0]);
        // Question: example.com A IN.
        m.extend_from_slice(b"\x07example\x03com\x00\x00\x01\x00\x01");
        // Answer name at offset 29 pointing to offset 29.
        m.extend_from_slice(&[0xc0, 29, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 1, 2, 3, 4]);
        m
    }

    #[test]
    fn truncated_and_refused() {
        let q = Question::new("example.com", true).unwrap();
        let query = q.encode(1, None).unwrap();
        let tc = reply_to(&query, |m, _| m.metadata.truncation = true);
        assert!(matches!(q.decode(1, &tc), Ok(Reply::Truncated)));
        let refused = reply_to(&query, |m, _| {
            m.metadata.response_code = ResponseCode::Refused
        });
        assert!(matches!(q.decode(1, &refused), Err(DnsError::Rcode(_))));
        let nx = reply_to(&query, |m, _| {
            m.metadata.response_code = ResponseCode::NXDomain
        });
        assert!(matches!(q.decode(1, &nx), Ok(Reply::Answer(a)) if a.ips.is_empty()));
        // No address, with the zone's SOA: kept for min(SOA TTL, minimum).
        let nodata = reply_to(&query, |m, _| {
            let zone = Name::from_ascii("example.com.").unwrap();
            let soa = SOA::new(zone.clone(), zone.clone(), 1, 60, 60, 60, 30);
            m.add_authority(Record::from_rdata(zone, 300, RData::SOA(soa)));
        });
        assert!(
            matches!(q.decode(1, &nodata), Ok(Reply::Answer(a)) if a.ips.is_empty() && a.ttl == 30)
        );
        assert!(Question::new("", false).is_err());
        assert!(Question::new("a..b", false).is_err());
    }
}
