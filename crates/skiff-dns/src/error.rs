//! Why a query failed, worded for the error log. Nothing here carries a reply's bytes: a
//! hostile server only gets its failure described, never echoed.

use std::fmt;
use std::io;
use std::time::Duration;

#[derive(Debug)]
pub enum DnsError {
    /// The reply is not a DNS message hickory-proto can read (garbage, cut short,
    /// compression-pointer loops and the like); the text is the decoder's.
    Malformed(String),
    /// Over TCP, TLS or HTTPS the reply carried another transaction's id.
    WrongId {
        sent: u16,
        got: u16,
    },
    /// A message without the QR bit, or answering another question.
    NotOurReply(&'static str),
    /// The server said so (SERVFAIL, REFUSED, NXDOMAIN...).
    Rcode(String),
    /// A reply larger than any DNS message may be (or than the HTTP body limit).
    TooLarge(usize),
    /// No reply within the server's timeout. `wrong_ids` counts datagrams dropped meanwhile
    /// because they answered another transaction (spoofing, or a late reply).
    Timeout {
        after: Duration,
        wrong_ids: u32,
    },
    /// The answer has no address of the wanted family, or none passed `expectIPs`.
    Empty,
    /// The HTTP exchange of DoH failed.
    Http(String),
    Io(io::Error),
    /// A name that is not a valid domain.
    BadName(String),
}

impl fmt::Display for DnsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DnsError::Malformed(e) => write!(f, "malformed DNS reply: {e}"),
            DnsError::WrongId { sent, got } => {
                write!(f, "reply has transaction id {got}, the query had {sent}")
            }
            DnsError::NotOurReply(why) => write!(f, "not a reply to our query: {why}"),
            DnsError::Rcode(code) => write!(f, "server answered {code}"),
            DnsError::TooLarge(n) => write!(f, "reply too large ({n} bytes)"),
            DnsError::Timeout { after, wrong_ids } => {
                write!(f, "no reply within {} ms", after.as_millis())?;
                if *wrong_ids > 0 {
                    write!(
                        f,
                        " ({wrong_ids} datagram(s) with a wrong transaction id ignored)"
                    )?;
                }
                Ok(())
            }
            DnsError::Empty => f.write_str("no address in the answer"),
            DnsError::Http(e) => write!(f, "DNS over HTTPS: {e}"),
            DnsError::Io(e) => write!(f, "{e}"),
            DnsError::BadName(name) => write!(f, "`{name}` is not a valid domain name"),
        }
    }
}

impl std::error::Error for DnsError {}

impl From<io::Error> for DnsError {
    fn from(e: io::Error) -> DnsError {
        DnsError::Io(e)
    }
}

impl From<DnsError> for io::Error {
    fn from(e: DnsError) -> io::Error {
        let kind = match &e {
            DnsError::Timeout { .. } => io::ErrorKind::TimedOut,
            DnsError::Empty | DnsError::Rcode(_) => io::ErrorKind::NotFound,
            DnsError::BadName(_) => io::ErrorKind::InvalidInput,
            DnsError::Io(e) => e.kind(),
            _ => io::ErrorKind::InvalidData,
        };
        io::Error::new(kind, e.to_string())
    }
}
