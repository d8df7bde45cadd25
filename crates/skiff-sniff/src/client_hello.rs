//! ClientHello peek: given the first bytes a client sent, tell whether it is TLS and, once the
//! whole ClientHello has arrived (possibly over several records), extract SNI, ALPN and
//! versions. Bounded: at most [`MAX_CLIENT_HELLO_LEN`] bytes of handshake message; never
//! panics, never allocates more than that.

use skiff_core::wire::Reader;

/// Largest ClientHello message accepted (the handshake message body, 24-bit length).
pub const MAX_CLIENT_HELLO_LEN: usize = 32 * 1024;
const MAX_RECORD_LEN: usize = 1 << 14;

const EXT_SERVER_NAME: u16 = 0;
const EXT_ALPN: u16 = 16;
const EXT_SUPPORTED_VERSIONS: u16 = 43;

/// Outcome of a peek.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peek {
    /// Looks like TLS so far; feed more bytes (the same prefix plus what arrived).
    Incomplete,
    /// Not a TLS handshake record (plain HTTP, SSH, …).
    NotTls,
    /// TLS records, but not a well-formed ClientHello within the bounds.
    Malformed(&'static str),
    ClientHello(ClientHelloInfo),
}

/// What the ClientHello says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientHelloInfo {
    /// `ClientHello.legacy_version` (0x0303 for TLS 1.2 and 1.3).
    pub legacy_version: u16,
    /// Record-layer version of the first record.
    pub record_version: u16,
    /// `supported_versions` extension contents (empty if absent ⇒ at most TLS 1.2).
    pub supported_versions: Vec<u16>,
    pub cipher_suites: Vec<u16>,
    /// First `host_name` of the `server_name` extension.
    pub sni: Option<String>,
    /// ALPN protocol names in client preference order (non-UTF-8 bytes replaced).
    pub alpn: Vec<String>,
    /// Extension types in the order sent.
    pub extensions: Vec<u16>,
    pub session_id_len: usize,
    /// Bytes of input (whole records) that carried the ClientHello.
    pub consumed: usize,
}

impl ClientHelloInfo {
    /// Whether TLS 1.3 (0x0304) is offered.
    pub fn offers_tls13(&self) -> bool {
        self.supported_versions.contains(&0x0304)
    }
}

/// Peeks at the start of a connection. See [`Peek`].
pub fn peek_client_hello(buf: &[u8]) -> Peek {
    // Fast "not TLS" on the first bytes: handshake content type, major version 3.
    match buf {
        [] => return Peek::Incomplete,
        [b0, ..] if *b0 != 0x16 => return Peek::NotTls,
        [_, b1, ..] if *b1 != 0x03 => return Peek::NotTls,
        _ => {}
    }
    let mut message: Vec<u8> = Vec::new();
    let mut pos = 0;
    let mut record_version = 0;
    loop {
        let Some(hdr) = buf.get(pos..pos + 5) else {
            return Peek::Incomplete;
        };
        if hdr[0] != 0x16 {
            return Peek::Malformed("non-handshake record inside ClientHello");
        }
        if hdr[1] != 0x03 {
            return Peek::Malformed("record version");
        }
        if pos == 0 {
            record_version = u16::from_be_bytes([hdr[1], hdr[2]]);
        }
        let len = usize::from(u16::from_be_bytes([hdr[3], hdr[4]]));
        if len == 0 || len > MAX_RECORD_LEN {
            return Peek::Malformed("record length");
        }
        let Some(fragment) = buf.get(pos + 5..pos + 5 + len) else {
            return Peek::Incomplete;
        };
        pos += 5 + len;
        message.extend_from_slice(fragment);
        if message.len() < 4 {
            continue;
        }
        if message[0] != 1 {
            return Peek::Malformed("first handshake message is not ClientHello");
        }
        let body_len = (usize::from(message[1]) << 16)
            | (usize::from(message[2]) << 8)
            | usize::from(message[3]);
        if body_len > MAX_CLIENT_HELLO_LEN {
            return Peek::Malformed("ClientHello too large");
        }
        if message.len() < 4 + body_len {
            continue;
        }
        // Bytes past the ClientHello in its last record would be a second handshake message;
        // a client sends nothing else before the server's reply, but tolerate it.
        return match parse_body(&message[4..4 + body_len]) {
            Ok(mut info) => {
                info.record_version = record_version;
                info.consumed = pos;
                Peek::ClientHello(info)
            }
            Err(e) => Peek::Malformed(e),
        };
    }
}

/// Parses a ClientHello handshake message without its record layer (as QUIC's CRYPTO frames
/// carry it): `Incomplete` until `message` holds the whole of it.
pub fn parse_client_hello_message(message: &[u8]) -> Peek {
    let Some(header) = message.get(..4) else {
        return Peek::Incomplete;
    };
    if header[0] != 1 {
        return Peek::Malformed("first handshake message is not ClientHello");
    }
    let body_len =
        (usize::from(header[1]) << 16) | (usize::from(header[2]) << 8) | usize::from(header[3]);
    if body_len > MAX_CLIENT_HELLO_LEN {
        return Peek::Malformed("ClientHello too large");
    }
    let Some(body) = message.get(4..4 + body_len) else {
        return Peek::Incomplete;
    };
    match parse_body(body) {
        Ok(mut info) => {
            info.consumed = 4 + body_len;
            Peek::ClientHello(info)
        }
        Err(e) => Peek::Malformed(e),
    }
}

fn parse_body(body: &[u8]) -> Result<ClientHelloInfo, &'static str> {
    let mut r = Reader::new(body);
    let legacy_version = r.u16().ok_or("version")?;
    r.take(32).ok_or("random")?;
    let session_id = r.vec8().ok_or("session id")?;
    if session_id.len() > 32 {
        return Err("session id longer than 32");
    }
    let suites = r.vec16().ok_or("cipher suites")?;
    if suites.is_empty() || !suites.len().is_multiple_of(2) {
        return Err("cipher suites length");
    }
    let cipher_suites = suites
        .chunks_exact(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]))
        .collect();
    if r.vec8().ok_or("compression methods")?.is_empty() {
        return Err("no compression method");
    }
    let mut info = ClientHelloInfo {
        legacy_version,
        record_version: 0,
        supported_versions: Vec::new(),
        cipher_suites,
        sni: None,
        alpn: Vec::new(),
        extensions: Vec::new(),
        session_id_len: session_id.len(),
        consumed: 0,
    };
    if r.rest().is_empty() {
        return Ok(info); // no extensions (old clients)
    }
    let mut exts = Reader::new(r.vec16().ok_or("extensions")?);
    if !r.rest().is_empty() {
        return Err("bytes after extensions");
    }
    while !exts.rest().is_empty() {
        let ty = exts.u16().ok_or("extension type")?;
        let data = exts.vec16().ok_or("extension data")?;
        if info.extensions.contains(&ty) {
            return Err("duplicate extension");
        }
        info.extensions.push(ty);
        match ty {
            EXT_SERVER_NAME => info.sni = parse_sni(data)?,
            EXT_ALPN => info.alpn = parse_alpn(data)?,
            EXT_SUPPORTED_VERSIONS => info.supported_versions = parse_versions(data)?,
            _ => {}
        }
    }
    Ok(info)
}

fn whole<'a>(
    data: &'a [u8],
    f: impl FnOnce(&mut Reader<'a>) -> Result<&'a [u8], &'static str>,
) -> Result<&'a [u8], &'static str> {
    let mut r = Reader::new(data);
    let inner = f(&mut r)?;
    if r.rest().is_empty() {
        Ok(inner)
    } else {
        Err("extension trailing bytes")
    }
}

fn parse_sni(data: &[u8]) -> Result<Option<String>, &'static str> {
    // An empty server_name extension is what servers send back; accept it from clients too.
    if data.is_empty() {
        return Ok(None);
    }
    let mut list = Reader::new(whole(data, |r| r.vec16().ok_or("server name list"))?);
    let mut sni = None;
    while !list.rest().is_empty() {
        let kind = list.u8().ok_or("server name type")?;
        let name = list.vec16().ok_or("server name")?;
        if kind == 0 && sni.is_none() {
            if name.is_empty() || !name.iter().all(|c| c.is_ascii_graphic()) {
                return Err("server name not a printable ASCII host");
            }
            sni = Some(String::from_utf8_lossy(name).into_owned());
        }
    }
    Ok(sni)
}

fn parse_alpn(data: &[u8]) -> Result<Vec<String>, &'static str> {
    let mut list = Reader::new(whole(data, |r| r.vec16().ok_or("ALPN list"))?);
    let mut out = Vec::new();
    while !list.rest().is_empty() {
        let p = list.vec8().ok_or("ALPN protocol")?;
        if p.is_empty() {
            return Err("empty ALPN protocol");
        }
        out.push(String::from_utf8_lossy(p).into_owned());
    }
    Ok(out)
}

fn parse_versions(data: &[u8]) -> Result<Vec<u16>, &'static str> {
    let v = whole(data, |r| r.vec8().ok_or("supported versions"))?;
    if !v.len().is_multiple_of(2) {
        return Err("supported versions length");
    }
    Ok(v.chunks_exact(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]))
        .collect())
}
