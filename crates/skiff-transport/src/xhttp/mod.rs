//! Xray's XHTTP (formerly SplitHTTP) transport over HTTP/1.1 and HTTP/2: one tunnel carried
//! by several HTTP requests. Xray's transport/internet/splithttp defines the wire:
//!
//! * packet-up: `GET /path/SESSION` is the download; each upload is `POST /path/SESSION/SEQ`,
//!   reassembled in `SEQ` order on the server ([`reorder`], [`session`]);
//! * stream-up: the same download, and one streaming `POST /path/SESSION` as the upload;
//! * stream-one: one `POST /path/` carries both directions (HTTP/2; over HTTP/1.1 too);
//! * `auto`: a client picks packet-up, or under REALITY stream-one (stream-up when the
//!   downloads go elsewhere); skiff-app decides, as it knows the security layer;
//! * `downloadSettings`: a client sends the download `GET` through another dialer, to another
//!   server address, with that side's own settings ([`XhttpDialer::download_from`]).
//!
//! Every request carries `x_padding` (in the `Referer`'s query, as Xray's client sends it) of
//! a length within `xPaddingBytes`; a server refuses a request without it.
//!
//! [`request`] decides what a request is (sans-IO), [`h1`]/[`chunked`] and [`h2io`] speak the
//! two HTTP versions, [`server`] is the inbound's [`skiff_core::MultiplexServer`] and
//! [`client`] the outbound's [`skiff_core::Dialer`] with xmux's connection reuse. HTTP/3 is
//! not done.

pub mod chunked;
pub mod client;
pub mod h1;
pub mod h2io;
pub mod pacer;
pub mod reorder;
pub mod request;
pub mod server;
pub mod session;
pub mod tunnel;

pub use client::XhttpDialer;
pub use server::XhttpServer;

/// `mode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    #[default]
    Auto,
    PacketUp,
    StreamUp,
    StreamOne,
}

/// An inclusive range Xray picks a random value from (`{"from": a, "to": b}` or `"a-b"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    pub from: u32,
    pub to: u32,
}

impl Range {
    pub const fn fixed(v: u32) -> Range {
        Range { from: v, to: v }
    }

    /// A uniformly random value in the range (`from` when the range is empty or reversed).
    pub fn pick(&self) -> u32 {
        if self.to <= self.from {
            return self.from;
        }
        let mut b = [0u8; 4];
        skiff_crypto::random::fill(&mut b);
        let span = u64::from(self.to - self.from) + 1;
        self.from + (u64::from(u32::from_le_bytes(b)) % span) as u32
    }
}

/// `xmux`: how a client spreads tunnels over connections. Zero means "no limit", as in Xray.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Xmux {
    pub max_concurrency: Range,
    pub max_connections: Range,
    pub c_max_reuse_times: Range,
    pub h_max_request_times: Range,
    pub h_max_reusable_secs: Range,
}

impl Default for Xmux {
    /// Xray's defaults when `xmux` is absent (infra/conf `SplitHTTPConfig.Build`).
    fn default() -> Self {
        Xmux {
            max_concurrency: Range::fixed(0),
            max_connections: Range::fixed(3),
            c_max_reuse_times: Range::fixed(0),
            h_max_request_times: Range { from: 600, to: 900 },
            h_max_reusable_secs: Range {
                from: 1800,
                to: 3000,
            },
        }
    }
}

/// `xhttpSettings` after Xray's defaults are applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XhttpOptions {
    /// `path` as configured (a query after `?` is kept for the client's requests).
    pub path: String,
    /// `host`: what a client sends; when set, what a server requires.
    pub host: Option<String>,
    pub mode: Mode,
    /// `headers` a client adds to every request.
    pub headers: Vec<(String, String)>,
    /// `xPaddingBytes`, default 100–1000.
    pub x_padding_bytes: Range,
    pub no_grpc_header: bool,
    pub no_sse_header: bool,
    /// `scMaxEachPostBytes`, default 1 000 000.
    pub sc_max_each_post_bytes: Range,
    /// `scMinPostsIntervalMs`, default 30.
    pub sc_min_posts_interval_ms: Range,
    /// `scMaxBufferedPosts`, default 30.
    pub sc_max_buffered_posts: usize,
    /// `scStreamUpServerSecs`, default 20–80.
    pub sc_stream_up_server_secs: Range,
    pub xmux: Xmux,
}

impl Default for XhttpOptions {
    fn default() -> Self {
        XhttpOptions {
            path: "/".into(),
            host: None,
            mode: Mode::Auto,
            headers: Vec::new(),
            x_padding_bytes: Range {
                from: 100,
                to: 1000,
            },
            no_grpc_header: false,
            no_sse_header: false,
            sc_max_each_post_bytes: Range::fixed(1_000_000),
            sc_min_posts_interval_ms: Range::fixed(30),
            sc_max_buffered_posts: 30,
            sc_stream_up_server_secs: Range { from: 20, to: 80 },
            xmux: Xmux::default(),
        }
    }
}

/// `X` repeated to a random length within `range`: Xray's default padding (`repeat-x`).
pub fn padding(range: Range) -> String {
    "X".repeat(range.pick() as usize)
}
