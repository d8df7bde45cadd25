//! The Trojan outbound side: a stream wrapper that sends the request header in front of the
//! first payload (trojan.md §1, §5). Trojan has no response header: reads pass straight
//! through.

use skiff_core::{Address, BoxStream};

use super::codec::{Command, PasswordHash, Request, encode_request};
use crate::header_first::{HeaderFirst, HeaderFirstStream};

/// At most this many payload bytes ride in the same write as the request header: together
/// they stay within one TLS record, which is all trojan-gfw's server reads before deciding.
const FIRST_PAYLOAD_MAX: usize = 8 * 1024;

/// Wraps an established stream (TLS, or WebSocket over TLS) as a Trojan client connection to
/// `destination` with `command`.
///
/// The request header is sent together with the first payload write (one write of the header
/// and up to 8 KiB of payload), or alone on the first read, `poll_read_ready`, flush or
/// shutdown if the client has nothing to send yet (a server-speaks-first protocol). A
/// destination the header cannot carry (an invalid domain name) is an error on the first I/O.
pub fn connect(
    stream: BoxStream,
    hash: &PasswordHash,
    destination: &Address,
    command: Command,
) -> BoxStream {
    let request = Request {
        hash: *hash,
        command,
        destination: destination.clone(),
    };
    let mut out = Vec::new();
    let encoded = encode_request(&request, &mut out)
        .map(|()| out)
        .map_err(|e| e.to_string());
    Box::new(HeaderFirstStream::new(
        stream,
        HeaderFirst::new("Trojan", encoded, FIRST_PAYLOAD_MAX),
    ))
}
