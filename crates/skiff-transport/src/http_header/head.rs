//! The heads of Xray's HTTP header obfuscation, sans-IO: the client's request and the server's
//! response built from their templates, the server's verdict on a request head (read as Go's
//! `net/http` reads it, which is what Xray's server calls), the canned 404/400 answers, and
//! the client's skip of the response head. Every parse reports how many bytes the head used:
//! whatever follows already belongs to the stream.

use crate::Parsed;

/// Longest head read, either side (Xray's `maxHeaderLength`).
pub const MAX_HEAD_LEN: usize = 8192;
const ENDING: &[u8] = b"\r\n\r\n";

/// What a client sends before its first byte (`tcpSettings.header.request`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestTemplate {
    pub method: String,
    /// Without the `HTTP/` prefix, e.g. "1.1".
    pub version: String,
    /// One is picked per connection; a server accepts any of them.
    pub paths: Vec<String>,
    /// In the order sent; one value is picked per connection.
    pub headers: Vec<(String, Vec<String>)>,
}

/// What a server sends before its first byte (`tcpSettings.header.response`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResponseTemplate {
    pub version: String,
    pub status: String,
    pub reason: String,
    pub headers: Vec<(String, Vec<String>)>,
}

/// `pick(n)` returns an index below `n` (`n` ≥ 2); Xray picks uniformly at random.
fn pick_str<'a>(values: &'a [String], pick: &mut impl FnMut(usize) -> usize) -> &'a str {
    match values.len() {
        0 => "",
        1 => &values[0],
        n => &values[pick(n) % n],
    }
}

fn push_headers(
    out: &mut Vec<u8>,
    headers: &[(String, Vec<String>)],
    pick: &mut impl FnMut(usize) -> usize,
) {
    for (name, values) in headers {
        for part in [name.as_str(), ": ", pick_str(values, pick), "\r\n"] {
            out.extend_from_slice(part.as_bytes());
        }
    }
}

impl RequestTemplate {
    /// `METHOD PATH HTTP/VERSION`, the headers, the blank line.
    pub fn head(&self, mut pick: impl FnMut(usize) -> usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(512);
        let path = pick_str(&self.paths, &mut pick);
        for part in [&self.method, " ", path, " HTTP/", &self.version, "\r\n"] {
            out.extend_from_slice(part.as_bytes());
        }
        push_headers(&mut out, &self.headers, &mut pick);
        out.extend_from_slice(b"\r\n");
        out
    }
}

impl ResponseTemplate {
    /// `HTTP/VERSION STATUS REASON`, the headers, `Date: <date>` unless configured, the blank
    /// line.
    pub fn head(&self, date: &str, mut pick: impl FnMut(usize) -> usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(256);
        for part in [
            "HTTP/",
            &self.version,
            " ",
            &self.status,
            " ",
            &self.reason,
            "\r\n",
        ] {
            out.extend_from_slice(part.as_bytes());
        }
        push_headers(&mut out, &self.headers, &mut pick);
        if !self
            .headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("date"))
        {
            for part in ["Date: ", date, "\r\n"] {
                out.extend_from_slice(part.as_bytes());
            }
        }
        out.extend_from_slice(b"\r\n");
        out
    }
}

/// Why a server refuses a request head; each has Xray's canned answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// A well-formed request for a path not configured: 404.
    NotFound,
    /// Not a request Go's `net/http` reads: 400. The reason is for the log only.
    BadRequest(&'static str),
    /// No head end within [`MAX_HEAD_LEN`]: 400.
    TooLong,
}

impl Refusal {
    /// The bytes Xray writes before closing (its `resp404`/`resp400` templates).
    pub fn answer(self, date: &str) -> Vec<u8> {
        let (status, reason) = match self {
            Refusal::NotFound => ("404", "Not Found"),
            Refusal::BadRequest(_) | Refusal::TooLong => ("400", "Bad Request"),
        };
        canned(status, reason).head(date, |_| 0)
    }

    pub fn describe(self) -> &'static str {
        match self {
            Refusal::NotFound => "path not configured",
            Refusal::BadRequest(why) => why,
            Refusal::TooLong => "request head longer than 8192 bytes",
        }
    }
}

/// Xray's answer to a connection closed before the server's head was written: a 400 too.
pub fn closed_early_answer(date: &str) -> Vec<u8> {
    Refusal::BadRequest("").answer(date)
}

fn canned(status: &str, reason: &str) -> ResponseTemplate {
    let one = |v: &str| vec![v.to_owned()];
    ResponseTemplate {
        version: "1.1".into(),
        status: status.into(),
        reason: reason.into(),
        headers: vec![
            ("Connection".into(), one("close")),
            ("Cache-Control".into(), one("private")),
            ("Content-Length".into(), one("0")),
        ],
    }
}

fn find_ending(buf: &[u8]) -> Option<usize> {
    buf.windows(ENDING.len()).position(|w| w == ENDING)
}

/// The client's side of the response: Xray's client checks nothing, it skips everything up
/// to and including the first blank line. Err: no blank line within [`MAX_HEAD_LEN`].
pub fn skip_response(buf: &[u8]) -> Result<Parsed<()>, &'static str> {
    let view = &buf[..buf.len().min(MAX_HEAD_LEN)];
    match find_ending(view) {
        Some(i) => Ok(Parsed::Complete((), i + ENDING.len())),
        None if buf.len() >= MAX_HEAD_LEN => Err("response head longer than 8192 bytes"),
        None => Ok(Parsed::Incomplete),
    }
}

/// Judges the request head at the start of `buf` as Xray's server does: read it as Go's
/// `http.ReadRequest` (complete lines are checked as they arrive, so a prober sending a bad
/// line is answered at once), then the request's path (percent-decoded, without the query)
/// must be one of `paths`. Complete: the head's length, blank line included.
pub fn judge_request(buf: &[u8], paths: &[String]) -> Result<Parsed<()>, Refusal> {
    let view = &buf[..buf.len().min(MAX_HEAD_LEN)];
    match find_ending(view) {
        Some(i) => {
            let request =
                read_lines(&view[..i + 2])?.ok_or(Refusal::BadRequest("no request line"))?;
            let path = request_path(request.target)?;
            if paths.iter().any(|p| p.as_bytes() == path.as_slice()) {
                Ok(Parsed::Complete((), i + ENDING.len()))
            } else {
                Err(Refusal::NotFound)
            }
        }
        None if buf.len() >= MAX_HEAD_LEN => Err(Refusal::TooLong),
        None => read_lines(view).map(|_| Parsed::Incomplete),
    }
}

/// The parts of a request line that matter here.
struct RequestLine<'a> {
    target: &'a [u8],
}

/// Checks every complete line in `data` (a line ends with LF, an optional CR before it is
/// not part of it) as Go's `readRequest` would; a trailing partial line is left for later.
/// Returns the request line once there is one.
fn read_lines(data: &[u8]) -> Result<Option<RequestLine<'_>>, Refusal> {
    let mut pieces: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    // The last piece has no LF after it: incomplete (or empty when `data` ends in LF).
    pieces.pop();
    let mut lines_iter = pieces
        .into_iter()
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let Some(first) = lines_iter.next() else {
        return Ok(None);
    };
    let request = request_line(first)?;
    let mut fields = Fields::default();
    let mut first_header = true;
    for line in lines_iter {
        if line.is_empty() {
            // Go's header ends here; Xray waits for CRLF CRLF, and what it would then do
            // with the rest is a quirk we do not copy.
            return Err(Refusal::BadRequest("blank line before the head's end"));
        }
        if line[0] == b' ' || line[0] == b'\t' {
            if first_header {
                return Err(Refusal::BadRequest("malformed MIME header initial line"));
            }
            continue; // a continuation line: Go joins it to the previous header
        }
        first_header = false;
        fields.add(line)?;
    }
    fields.check()?;
    Ok(Some(request))
}

/// `METHOD SP TARGET SP VERSION`, split on the first two spaces as Go does.
fn request_line(line: &[u8]) -> Result<RequestLine<'_>, Refusal> {
    let bad = Refusal::BadRequest("malformed HTTP request");
    let (method, rest) = split_once(line, b' ').ok_or(bad)?;
    let (target, version) = split_once(rest, b' ').ok_or(bad)?;
    if method.is_empty() || !method.iter().all(|&b| is_token(b)) {
        return Err(Refusal::BadRequest("invalid method"));
    }
    if !http_version(version) {
        return Err(Refusal::BadRequest("malformed HTTP version"));
    }
    if target.iter().any(|&b| b < 0x20 || b == 0x7f) {
        return Err(Refusal::BadRequest("control character in the URL"));
    }
    Ok(RequestLine { target })
}

fn split_once(s: &[u8], sep: u8) -> Option<(&[u8], &[u8])> {
    let i = s.iter().position(|&b| b == sep)?;
    Some((&s[..i], &s[i + 1..]))
}

/// RFC 9110 token characters (Go's `validHeaderFieldByte` / method check).
fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Go's `ParseHTTPVersion`: `HTTP/` major `.` minor, decimal, each at most 1000... in
/// practice the digits; what Go would refuse we refuse.
fn http_version(v: &[u8]) -> bool {
    let Some(rest) = v.strip_prefix(b"HTTP/") else {
        return false;
    };
    let Some((major, minor)) = split_once(rest, b'.') else {
        return false;
    };
    let num = |d: &[u8]| {
        !d.is_empty()
            && d.len() <= 4
            && d.iter().all(u8::is_ascii_digit)
            && std::str::from_utf8(d)
                .ok()
                .and_then(|s| s.parse::<u32>().ok())
                .is_some_and(|n| n <= 1000)
    };
    num(major) && num(minor)
}

/// The header checks `readRequest` and `readTransfer` make.
#[derive(Default)]
struct Fields<'a> {
    hosts: usize,
    content_length: Option<&'a [u8]>,
    chunked: Option<bool>,
}

impl<'a> Fields<'a> {
    fn add(&mut self, line: &'a [u8]) -> Result<(), Refusal> {
        let Some((name, value)) = split_once(line, b':') else {
            return Err(Refusal::BadRequest("malformed MIME header line"));
        };
        if name.is_empty() {
            return Ok(()); // Go skips a header with an empty name
        }
        if !name.iter().all(|&b| is_token(b)) {
            return Err(Refusal::BadRequest("malformed MIME header line"));
        }
        let value = value.trim_ascii();
        if name.eq_ignore_ascii_case(b"host") {
            self.hosts += 1;
        } else if name.eq_ignore_ascii_case(b"content-length") {
            if !value.iter().all(u8::is_ascii_digit) || value.is_empty() {
                return Err(Refusal::BadRequest("bad Content-Length"));
            }
            if self.content_length.is_some_and(|v| v != value) {
                return Err(Refusal::BadRequest("conflicting Content-Length"));
            }
            self.content_length = Some(value);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            let chunked = self.chunked.is_none() && value.eq_ignore_ascii_case(b"chunked");
            self.chunked = Some(chunked);
        }
        Ok(())
    }

    fn check(&self) -> Result<(), Refusal> {
        if self.hosts > 1 {
            return Err(Refusal::BadRequest("too many Host headers"));
        }
        if self.chunked == Some(false) {
            return Err(Refusal::BadRequest("unsupported transfer encoding"));
        }
        Ok(())
    }
}

/// `req.URL.Path` as Go's `url.ParseRequestURI` gives it: an origin-form target's path
/// without the query, percent-decoded; `*` as is; an absolute URI's path; else a 400.
fn request_path(target: &[u8]) -> Result<Vec<u8>, Refusal> {
    let bad = Refusal::BadRequest("invalid URI for request");
    let without_query =
        |t: &[u8]| -> Vec<u8> { t.split(|&b| b == b'?').next().unwrap_or(t).to_vec() };
    let raw = if target == b"*" {
        return Ok(b"*".to_vec());
    } else if target.starts_with(b"/") {
        without_query(target)
    } else {
        // scheme ":" rest
        let colon = target.iter().position(|&b| b == b':').ok_or(bad)?;
        let scheme = &target[..colon];
        let valid_scheme = scheme.first().is_some_and(u8::is_ascii_alphabetic)
            && scheme
                .iter()
                .all(|&b| b.is_ascii_alphanumeric() || b"+-.".contains(&b));
        if !valid_scheme {
            return Err(bad);
        }
        let rest = &target[colon + 1..];
        if let Some(after) = rest.strip_prefix(b"//") {
            let path_start = after
                .iter()
                .position(|&b| b == b'/' || b == b'?')
                .unwrap_or(after.len());
            let path = &after[path_start..];
            if path.starts_with(b"?") {
                Vec::new()
            } else {
                without_query(path)
            }
        } else if rest.starts_with(b"/") {
            without_query(rest)
        } else {
            Vec::new() // opaque: no path
        }
    };
    percent_decode(&raw).ok_or(bad)
}

fn percent_decode(s: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            let digit = |b: u8| (b as char).to_digit(16);
            out.push((digit(hex[0])? * 16 + digit(hex[1])?) as u8);
            i += 3;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    Some(out)
}

#[cfg(test)]
#[path = "head_tests.rs"]
mod tests;
