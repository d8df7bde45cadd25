//! The VLESS inbound handshake (vless.md §5, §6): read the request header, decide between
//! relay, UDP and fallback, and answer the response header.

use std::io;

use skiff_core::stream::with_prefix;
use skiff_core::{Address, BoxStream, ProxyStream};
use tokio::io::AsyncReadExt;

use super::codec::{
    Command, FLOW_VISION, MAX_REQUEST_HEADER_LEN, Parsed, RESPONSE_HEADER, VlessError,
    parse_request, parse_request_user,
};
use super::vision::{Side, VisionStream};
use crate::header_first::HeaderFirstStream;
use crate::user_id::{UserChangeError, UserId};
use skiff_core::Swap;
use std::sync::Arc;

/// How many bytes the handshake reads at most: a whole maximal header fits, plus a little of
/// the payload that usually arrives with it.
const READ_BUF_LEN: usize = 600;
const _: () = assert!(MAX_REQUEST_HEADER_LEN < READ_BUF_LEN);

/// A configured VLESS user.
#[derive(Clone, Debug)]
pub struct VlessUser {
    pub id: UserId,
    /// Reported as the session's user (routing, per-user counters).
    pub email: Option<String>,
    /// The user's flow is XTLS Vision: TCP requests must ask for it.
    pub vision: bool,
}

/// The users of a VLESS inbound: a table each connection takes a snapshot of, replaced whole
/// when users are added or removed at run time (Xray's API).
#[derive(Debug, Default)]
pub struct VlessServer {
    users: Swap<Vec<VlessUser>>,
}

impl VlessServer {
    pub fn new(users: Vec<VlessUser>) -> VlessServer {
        VlessServer {
            users: Swap::new(users),
        }
    }

    /// The users now.
    pub fn users(&self) -> Arc<Vec<VlessUser>> {
        self.users.load()
    }

    /// Adds `user` unless its email is already taken (Xray's rule: emails name users).
    pub fn add_user(&self, user: VlessUser) -> Result<(), UserChangeError> {
        self.users.update(|users| {
            if crate::user_id::email_taken(
                users.iter().map(|u| u.email.as_deref()),
                user.email.as_deref(),
            ) {
                return Err(UserChangeError::Exists);
            }
            let mut next = users.clone();
            next.push(user);
            Ok(next)
        })
    }

    /// Removes the users with this email.
    pub fn remove_user(&self, email: &str) -> Result<(), UserChangeError> {
        self.users.update(|users| {
            let next: Vec<VlessUser> = users
                .iter()
                .filter(|u| !crate::user_id::email_is(u.email.as_deref(), email))
                .cloned()
                .collect();
            if next.len() == users.len() {
                return Err(UserChangeError::NotFound);
            }
            Ok(next)
        })
    }

    /// Looks an id up in constant time across all users (no early exit); the first match wins.
    /// Same technique as [`crate::user_id::find_user`], over [`VlessUser`]s.
    fn find(users: &[VlessUser], id: &[u8; 16]) -> Option<usize> {
        let mut found = 0usize;
        let mut any = 0usize;
        for (index, user) in users.iter().enumerate() {
            let eq = usize::from(user.id.ct_eq(id));
            let take = (eq & !any).wrapping_neg();
            found = (index & take) | (found & !take);
            any |= eq;
        }
        if std::hint::black_box(any) == 1 {
            Some(found)
        } else {
            None
        }
    }
}

/// The outcome of a VLESS handshake.
pub enum VlessAccept {
    /// A valid TCP request: relay `stream` to `destination`. The response header has already
    /// been written, so `stream` is exactly the client's payload stream (payload bytes read
    /// with the header are replayed first through [`skiff_core::Prefixed`]); `raw_tcp()`
    /// still answers the socket when the input was one.
    Stream {
        destination: Address,
        stream: BoxStream,
        /// The user's email.
        user: Option<String>,
    },
    /// A UDP request (command 0x02): `stream` carries length-prefixed packets
    /// ([`super::udp`], e.g. through [`super::packet::VlessPacketStream`]) to and from
    /// `destination`. The response header has already been written.
    Udp {
        destination: Address,
        stream: BoxStream,
        user: Option<String>,
    },
    /// A Mux.Cool connection (command 0x03; Xray clients send UDP this way, as XUDP): the
    /// response header is written (or, under Vision, rides with the first frame) and `stream`
    /// carries Mux frames, for [`crate::mux::accept_udp`].
    Mux {
        stream: BoxStream,
        user: Option<String>,
    },
    /// Not a VLESS request for a known user (bad version, unknown id, or the connection ended
    /// before the id was complete): hand the connection to a fallback. `stream` replays every
    /// byte read so far; nothing has been written.
    Fallback { stream: BoxStream },
}

fn invalid(what: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

/// Runs the server side of the VLESS handshake on `stream` (vless.md §5).
///
/// Reads only as far as the request header needs (plus whatever arrived with it). A bad
/// version or an unknown user yields [`VlessAccept::Fallback`] without writing anything;
/// after a known user every problem (malformed header, flow, Mux, Reverse) is an error and
/// nothing is written either. The caller applies the handshake timeout and logs errors.
pub async fn accept<S: ProxyStream>(
    mut stream: S,
    server: &VlessServer,
) -> io::Result<VlessAccept> {
    let mut buf = [0u8; READ_BUF_LEN];
    let mut filled = 0usize;
    let mut user: Option<usize> = None;
    let users = server.users();
    loop {
        let n = stream.read(&mut buf[filled..]).await?;
        filled += n;
        let data = &buf[..filled];
        if user.is_none() {
            match parse_request_user(data) {
                Ok(Parsed::Complete(id)) => match VlessServer::find(&users, &id) {
                    Some(found) => user = Some(found),
                    None => {
                        return Ok(VlessAccept::Fallback {
                            stream: with_prefix(data, stream),
                        });
                    }
                },
                Ok(Parsed::Incomplete) if n == 0 => {
                    // The peer stopped before saying who it is: not VLESS for us.
                    return Ok(VlessAccept::Fallback {
                        stream: with_prefix(data, stream),
                    });
                }
                Ok(Parsed::Incomplete) => continue,
                Err(_) => {
                    return Ok(VlessAccept::Fallback {
                        stream: with_prefix(data, stream),
                    });
                }
            }
        }
        let Some(known) = user.and_then(|index| users.get(index)) else {
            continue;
        };
        let (request, header_len) = match parse_request(data) {
            Ok(Parsed::Complete(parsed)) => parsed,
            Ok(Parsed::Incomplete) if n == 0 => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "connection closed inside the VLESS request header",
                ));
            }
            Ok(Parsed::Incomplete) if filled == buf.len() => {
                // Unreachable: a maximal header fits in the buffer.
                return Err(invalid("VLESS request header too long"));
            }
            Ok(Parsed::Incomplete) => continue,
            Err(error) => return Err(invalid(error)),
        };
        let vision = vision_requested(&request, known)?;
        let destination = match (request.command, request.destination) {
            (Command::Mux, _) => Address::Domain("v1.mux.cool".into(), 0),
            (Command::Reverse, _) => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "VLESS Reverse (command 0x04) is not supported",
                ));
            }
            (_, Some(destination)) => destination,
            // The codec always yields a destination for TCP and UDP.
            (_, None) => return Err(invalid(VlessError::MissingDestination)),
        };
        let payload = &buf[header_len..filled];
        let user = known.email.clone();
        let stream: BoxStream = if vision {
            // The response header leaves with Vision's first frame.
            Box::new(VisionStream::new(
                Box::new(stream),
                Side::Server,
                *known.id.as_bytes(),
                RESPONSE_HEADER.to_vec(),
                payload,
            )?)
        } else {
            // The response header waits for the first answer, as Xray's does.
            let stream = HeaderFirstStream::response(Box::new(stream), "VLESS", &RESPONSE_HEADER);
            with_prefix(payload, stream)
        };
        return Ok(match request.command {
            Command::Mux => VlessAccept::Mux { stream, user },
            Command::Udp => VlessAccept::Udp {
                destination,
                stream,
                user,
            },
            _ => VlessAccept::Stream {
                destination,
                stream,
                user,
            },
        });
    }
}

/// The flow rules (vless.md §5 step 6): whether this request runs under XTLS Vision.
fn vision_requested(request: &super::codec::Request, user: &VlessUser) -> io::Result<bool> {
    match request.flow.as_deref() {
        Some(FLOW_VISION) if !user.vision => Err(invalid(
            "VLESS request asks for XTLS Vision, but this user's flow is not xtls-rprx-vision",
        )),
        Some(FLOW_VISION) if request.command == Command::Udp => Err(invalid(
            "XTLS Vision does not carry VLESS UDP (command 0x02)",
        )),
        Some(FLOW_VISION) => Ok(true),
        Some(other) => Err(invalid(format_args!(
            "VLESS flow \"{other}\" is not supported"
        ))),
        None if user.vision && request.command == Command::Tcp => Err(invalid(
            "this user's flow is xtls-rprx-vision, but the request has no flow (plain TLS-in-TLS is refused)",
        )),
        None => Ok(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_first_matching_user() {
        let server = VlessServer::new(vec![
            VlessUser {
                id: UserId::from_bytes([1; 16]),
                email: Some("a".into()),
                vision: false,
            },
            VlessUser {
                id: UserId::from_bytes([2; 16]),
                email: Some("b".into()),
                vision: false,
            },
            VlessUser {
                id: UserId::from_bytes([2; 16]),
                email: Some("c".into()),
                vision: false,
            },
        ]);
        let users = server.users();
        let email = |index: Option<usize>| users[index.unwrap()].email.clone();
        assert_eq!(
            email(VlessServer::find(&users, &[2; 16])).as_deref(),
            Some("b")
        );
        assert_eq!(
            email(VlessServer::find(&users, &[1; 16])).as_deref(),
            Some("a")
        );
        assert!(VlessServer::find(&users, &[3; 16]).is_none());
        assert!(VlessServer::find(&[], &[1; 16]).is_none());
        // Run-time changes: emails name users, the same email cannot be added twice.
        let added = VlessUser {
            id: UserId::from_bytes([3; 16]),
            email: Some("d".into()),
            vision: false,
        };
        server.add_user(added.clone()).unwrap();
        assert_eq!(server.add_user(added), Err(UserChangeError::Exists));
        assert!(VlessServer::find(&server.users(), &[3; 16]).is_some());
        server.remove_user("d").unwrap();
        assert_eq!(server.remove_user("d"), Err(UserChangeError::NotFound));
        assert!(VlessServer::find(&server.users(), &[3; 16]).is_none());
        // The snapshot taken before the changes is untouched.
        assert_eq!(users.len(), 3);
    }
}
