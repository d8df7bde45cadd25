//! The validated plan: what `skiff run` builds handlers from. Everything here has already been
//! checked (tags unique, rules point at existing outbounds, ports valid), so the app never has
//! to re-validate or guess defaults.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use std::sync::Arc;

use skiff_core::{Cidr, Networks, PortRange};
pub use skiff_dns::DnsConfig;
pub use skiff_geodata::{Domain, DomainKind, DomainSet, IpMatcher, IpSet};

#[derive(Clone, Debug)]
pub struct Plan {
    pub log: LogPlan,
    pub inbounds: Vec<InboundPlan>,
    /// Never empty: the first outbound is the default route (Xray's rule). A config without
    /// outbounds gets a `freedom` tagged "direct".
    pub outbounds: Vec<OutboundPlan>,
    pub routing: RoutingPlan,
    pub policy: PolicyPlan,
    /// The `dns` section, when there is one: routing's IP strategies and freedom's UseIP*
    /// resolve through it; without it they use the system resolver.
    pub dns: Option<DnsConfig>,
    /// The `api` section: Xray's gRPC API.
    pub api: Option<ApiPlan>,
    /// The `metrics` section: Prometheus text and Xray's expvar JSON over HTTP.
    pub metrics: Option<MetricsPlan>,
}

/// `metrics`: where the Prometheus (`/metrics`) and expvar (`/debug/vars`) endpoint listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetricsPlan {
    pub listen: std::net::SocketAddr,
}

/// `api`: where Xray's gRPC API is served and which services.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiPlan {
    /// The outbound tag routing rules send API connections to (Xray's older form).
    pub tag: Option<String>,
    /// Served directly on this address.
    pub listen: Option<std::net::SocketAddr>,
    /// The services to serve, of those skiff has (`StatsService`, `LoggerService`).
    pub services: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Debug,
    Info,
    Warning,
    Error,
    None,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogTarget {
    Stderr,
    File(PathBuf),
    Off,
}

#[derive(Clone, Debug)]
pub struct LogPlan {
    /// Xray's `loglevel`, default `warning`.
    pub level: LogLevel,
    /// Xray's `access`: "" or absent = stderr, "none" = off, else a file path.
    pub access: LogTarget,
    /// Xray's `error`: same rules as `access`.
    pub error: LogTarget,
}

#[derive(Clone, Debug)]
pub struct InboundPlan {
    /// Xray allows an empty tag; the plan keeps "" then (routing by inboundTag cannot match it).
    pub tag: String,
    /// `listen`, default 0.0.0.0 as in Xray.
    pub listen: IpAddr,
    /// `port`: a number, "a-b" or "a,b,c-d" in Xray; each range is listened on port by port.
    pub ports: Vec<PortRange>,
    pub protocol: InboundProtocol,
    pub stream: StreamPlan,
    /// `sniffing`, when enabled.
    pub sniffing: Option<SniffingPlan>,
}

/// An inbound's `sniffing`: which sniffers run on a connection's first bytes, and what the
/// name they find does.
#[derive(Clone, Debug, Default)]
pub struct SniffingPlan {
    /// `destOverride` (`http`, `tls`/`https`/`ssl`, `quic`): sniffed names of these protocols
    /// replace the destination (or, with `route_only`, only feed routing). `fakedns` has no
    /// pool to act on in skiff and is dropped with a warning.
    pub dest_override: Vec<SniffProtocol>,
    /// Xray's `metadataOnly`: no content is read (Vision and splice keep their path); with
    /// no metadata sniffer in skiff this sniffs nothing.
    pub metadata_only: bool,
    /// The name is used for routing only; the connection still goes to the sent address.
    pub route_only: bool,
    /// `domainsExcluded`: names never used for the override (Xray's domain rule forms).
    pub domains_excluded: Option<Arc<DomainSet>>,
    /// `ipsExcluded`: destinations whose address is never overridden.
    pub ips_excluded: Vec<Cidr>,
}

/// A protocol a sniffer recognises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SniffProtocol {
    Http,
    Tls,
    Quic,
}

#[derive(Clone, Debug)]
pub enum InboundProtocol {
    Socks(SocksInbound),
    Http(HttpInbound),
    Tunnel(TunnelInbound),
    Vless(VlessInbound),
    Trojan(TrojanInbound),
    Shadowsocks(ShadowsocksInbound),
    Vmess(VmessInbound),
    Kcptun(KcptunInbound),
    Udpspeeder(crate::plan_udpspeeder::UdpspeederInbound),
    Udp2raw(crate::plan_udp2raw::Udp2rawInbound),
}

impl InboundProtocol {
    /// The `fallbacks` of a protocol that has them (VLESS, Trojan); empty otherwise.
    pub fn fallbacks(&self) -> &[FallbackPlan] {
        match self {
            InboundProtocol::Vless(v) => &v.fallbacks,
            InboundProtocol::Trojan(t) => &t.fallbacks,
            _ => &[],
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Account {
    pub user: String,
    pub pass: String,
}

#[derive(Clone, Debug)]
pub struct SocksInbound {
    /// `auth`: "noauth" (default) → empty; "password" → the `accounts` (must be non-empty).
    pub accounts: Vec<Account>,
    /// `udp`, default false.
    pub udp: bool,
    /// `ip`: the address announced in UDP ASSOCIATE replies; None = the inbound's local address.
    pub announce_ip: Option<IpAddr>,
    /// `userLevel`, default 0.
    pub user_level: u32,
}

#[derive(Clone, Debug)]
pub struct HttpInbound {
    /// `accounts`; empty = no authentication.
    pub accounts: Vec<Account>,
    /// `allowTransparent`, default false.
    pub allow_transparent: bool,
    pub user_level: u32,
}

#[derive(Clone, Debug)]
pub struct TunnelInbound {
    /// `address` (IP or domain); None only when `followRedirect` is true.
    pub address: Option<String>,
    /// `port`; 0 = "same port as the accepted connection" is not Xray's rule: required unless
    /// `followRedirect`, then 0.
    pub port: u16,
    /// `network`, default "tcp".
    pub network: Networks,
    /// `followRedirect`, default false.
    pub follow_redirect: bool,
    pub user_level: u32,
}

#[derive(Clone, Debug)]
pub struct OutboundPlan {
    /// Unique among outbounds; Xray allows an empty tag on one outbound, we keep "" then.
    pub tag: String,
    pub protocol: OutboundProtocol,
    pub stream: StreamPlan,
    /// `proxySettings.tag`: dial through that outbound instead of directly (chaining). Checked
    /// to exist and not to form a cycle.
    pub via: Option<String>,
    /// `mux` when enabled: connections become Mux.Cool sub-connections.
    pub mux: Option<MuxPlan>,
}

/// An outbound's enabled `mux`, Xray's numbers as written (0: Xray's default, negative: that
/// traffic goes without mux).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MuxPlan {
    pub concurrency: i32,
    pub xudp_concurrency: i32,
    pub xudp_proxy_udp443: Udp443Plan,
}

/// `xudpProxyUDP443`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Udp443Plan {
    Reject,
    Allow,
    Skip,
}

#[derive(Clone, Debug)]
pub enum OutboundProtocol {
    Freedom(FreedomOutbound),
    Blackhole(BlackholeOutbound),
    Vless(VlessOutbound),
    Trojan(TrojanOutbound),
    Shadowsocks(ShadowsocksOutbound),
    Vmess(VmessOutbound),
    Kcptun(KcptunOutbound),
    Udpspeeder(crate::plan_udpspeeder::UdpspeederOutbound),
    Udp2raw(crate::plan_udp2raw::Udp2rawOutbound),
    /// Xray's `dns` outbound, its settings as skiff-dns takes them.
    Dns(skiff_dns::outbound::DnsOutboundConfig),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FreedomDomainStrategy {
    AsIs,
    UseIp,
    UseIpv4,
    UseIpv6,
}

#[derive(Clone, Debug)]
pub struct FreedomOutbound {
    /// `domainStrategy`, default AsIs; Xray's aliases UseIPv4v6/UseIPv6v4 map to UseIp.
    pub domain_strategy: FreedomDomainStrategy,
    /// `redirect` "host:port": every connection goes there instead. Port 0 keeps the original
    /// port; an empty host keeps the original host.
    pub redirect: Option<(String, u16)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlackholeResponse {
    None,
    Http,
}

#[derive(Clone, Debug)]
pub struct BlackholeOutbound {
    /// `response.type`, default "none".
    pub response: BlackholeResponse,
}

/// `streamSettings`: the transport (`network`) and the security layer above it. Transports
/// and security layers skiff does not implement are config errors naming the value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamPlan {
    pub network: StreamNetwork,
    pub security: StreamSecurity,
    /// `sockopt.tcpCongestion`: the TCP congestion control for this side's connections.
    /// None: the system's default, and Reno for loopback peers (see skiff_core::tcp_tuning).
    /// The other socket options are not modelled yet.
    pub tcp_congestion: Option<String>,
    /// `udp2rawSettings` (Skiff's own key; Xray has no such setting): the transport's UDP
    /// goes through an in-process udp2raw tunnel (fake TCP, UDP or ICMP) to the server. For
    /// the `kcp` and `kcptun` networks and the udpspeeder and kcptun protocols only.
    pub udp2raw: Option<crate::plan_udp2raw::Udp2rawTuning>,
    /// Which keys the config wrote, where a default and an absent key look alike in the
    /// values above.
    pub written: StreamWritten,
}

/// What `streamSettings` wrote beyond its values: Xray's ListInbounds (and so Skiff's)
/// reports a handler's stream settings as written, e.g. no `streamSettings` at all, or a
/// `rawSettings` object holding only defaults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamWritten {
    /// `streamSettings` itself.
    pub stream_settings: bool,
    /// The settings object of the transport in use (`rawSettings`/`tcpSettings`,
    /// `wsSettings`, `httpupgradeSettings`, `grpcSettings`, …).
    pub transport_settings: bool,
    /// `header` inside `rawSettings`/`tcpSettings` (`type: "none"` included).
    pub raw_header: bool,
}

impl StreamPlan {
    /// Nothing but `udp2rawSettings` (or nothing at all): what a protocol bringing its own UDP
    /// transport (udpspeeder, kcptun) takes.
    pub fn only_udp2raw(&self) -> bool {
        self.network == StreamNetwork::Tcp
            && self.security == StreamSecurity::None
            && self.tcp_congestion.is_none()
            && !self.written.transport_settings
            && !self.written.raw_header
    }

    /// Raw TCP under TLS or REALITY (a TLS 1.3 session too), nothing else: what XTLS Vision
    /// runs on.
    pub fn is_raw_tls(&self) -> bool {
        self.network == StreamNetwork::Tcp
            && matches!(
                self.security,
                StreamSecurity::Tls(_) | StreamSecurity::Reality(_)
            )
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum StreamNetwork {
    /// `tcp` / `raw` (the default), without header obfuscation.
    #[default]
    Tcp,
    /// `tcp` / `raw` with `header.type: "http"` (`rawSettings`, else `tcpSettings`).
    HttpHeader(HttpHeaderPlan),
    /// `ws` / `websocket`.
    Ws(WsPlan),
    /// `httpupgrade`: an HTTP/1.1 upgrade, then the raw stream (`httpupgradeSettings`).
    HttpUpgrade(HttpUpgradePlan),
    /// `grpc` (also `gun`): Xray's gRPC transport, each tunnel one call over HTTP/2
    /// (`grpcSettings`).
    Grpc(GrpcPlan),
    /// `xhttp` / `splithttp`: a tunnel over several HTTP requests (`xhttpSettings`).
    Xhttp(XhttpPlan),
    /// `kcp` / `mkcp`: V2Ray's mKCP over UDP (`kcpSettings`).
    Mkcp(skiff_kcp::mkcp::MkcpConfig),
    /// `kcptun`: kcptun's KCP + smux over UDP (`kcptunSettings`), one smux stream per
    /// connection. Skiff's own name; not an Xray transport.
    Kcptun(KcptunStreamPlan),
}

impl StreamNetwork {
    /// The transport runs over UDP: the inbound listens on a UDP port, not TCP.
    pub fn is_udp(&self) -> bool {
        matches!(self, StreamNetwork::Mkcp(_) | StreamNetwork::Kcptun(_))
    }
}

/// `kcptunSettings`: the kcptun inbound/outbound tuning keys, and `conn` for outbounds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KcptunStreamPlan {
    pub tuning: KcptunTuning,
    /// KCP sessions per server used round-robin (outbounds), default 1.
    pub conn: usize,
}

/// `wsSettings`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WsPlan {
    /// `path`, default "/"; always starts with "/".
    pub path: String,
    /// `host` (or a `Host` entry of `headers` when `host` is absent).
    pub host: Option<String>,
    /// `headers` in config order, without any `Host` entry.
    pub headers: Vec<(String, String)>,
    /// `acceptProxyProtocol`, default false (inbounds only).
    pub accept_proxy_protocol: bool,
}

/// `header` of `rawSettings`/`tcpSettings` with `type: "http"`, Xray's defaults filled in
/// (infra/conf `AuthenticatorRequest`/`AuthenticatorResponse`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpHeaderPlan {
    pub request: HttpRequestPlan,
    pub response: HttpResponsePlan,
}

/// `header.request`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpRequestPlan {
    /// Default "GET".
    pub method: String,
    /// Default "1.1" (sent as `HTTP/1.1`).
    pub version: String,
    /// Default ["/"]; a client picks one per connection, a server accepts any.
    pub paths: Vec<String>,
    /// Sorted by name as Xray sorts them; None: Xray's browser-like defaults.
    pub headers: Option<Vec<(String, Vec<String>)>>,
}

/// `header.response`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpResponsePlan {
    /// Default "1.1".
    pub version: String,
    /// Default "200".
    pub status: String,
    /// Default "OK".
    pub reason: String,
    /// Sorted by name; None: Xray's defaults.
    pub headers: Option<Vec<(String, Vec<String>)>>,
}

/// `httpupgradeSettings`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpUpgradePlan {
    /// `path` as Xray normalises it ("" ⇒ "/", a leading "/" added), `?ed=N` still in it.
    pub path: String,
    /// `host`: what an outbound sends (default: the TLS server name, else the server
    /// address) and, when set, what an inbound requires.
    pub host: Option<String>,
    /// `headers` in config order (never `Host`: Xray refuses it here).
    pub headers: Vec<(String, String)>,
}

/// `grpcSettings`, with Xray's key names (infra/conf `GRPCConfig`); 0 means unset.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GrpcPlan {
    /// `serviceName` as given: a name, or a custom path starting with "/" (`/a/b|c`).
    pub service_name: String,
    /// `authority`: the client's `:authority`; None when absent or empty.
    pub authority: Option<String>,
    /// `multiMode`: the client calls TunMulti (MultiHunk messages) instead of Tun.
    pub multi_mode: bool,
    /// `idle_timeout`, seconds between keepalive PINGs.
    pub idle_timeout: u32,
    /// `health_check_timeout`, seconds a PING may go unanswered.
    pub health_check_timeout: u32,
    /// `permit_without_stream`: the client pings even with no call open.
    pub permit_without_stream: bool,
    /// `initial_windows_size`: the HTTP/2 stream window, bytes.
    pub initial_windows_size: u32,
    /// `user_agent` as given: "" or "chrome", "firefox", "edge", "golang", or a literal.
    pub user_agent: String,
}

/// `xhttpSettings` (`extra` merged as Xray merges it, Xray's defaults applied). Ranges are
/// `(from, to)`, inclusive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XhttpPlan {
    /// `path` as written (default "/"), a query after `?` included.
    pub path: String,
    pub host: Option<String>,
    pub mode: XhttpMode,
    /// `headers` in config order (never `Host`).
    pub headers: Vec<(String, String)>,
    pub x_padding_bytes: (u32, u32),
    pub no_grpc_header: bool,
    pub no_sse_header: bool,
    pub sc_max_each_post_bytes: (u32, u32),
    pub sc_min_posts_interval_ms: (u32, u32),
    pub sc_max_buffered_posts: usize,
    pub sc_stream_up_server_secs: (u32, u32),
    pub xmux: XmuxPlan,
    /// `downloadSettings`: a client's downloads go to this server, with these settings
    /// (a server ignores it, as Xray's does).
    pub download: Option<Box<XhttpDownloadPlan>>,
}

/// `xhttpSettings.extra.downloadSettings`: a stream settings object with the server's
/// `address` and `port`, its `network` XHTTP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XhttpDownloadPlan {
    pub address: String,
    pub port: u16,
    pub stream: StreamPlan,
}

/// `xhttpSettings.mode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum XhttpMode {
    #[default]
    Auto,
    PacketUp,
    StreamUp,
    StreamOne,
}

/// `xhttpSettings.xmux`; 0 is "no limit". Absent (or all zero): Xray's defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XmuxPlan {
    pub max_concurrency: (u32, u32),
    pub max_connections: (u32, u32),
    pub c_max_reuse_times: (u32, u32),
    pub h_max_request_times: (u32, u32),
    pub h_max_reusable_secs: (u32, u32),
}

impl XmuxPlan {
    pub fn zero() -> Self {
        XmuxPlan {
            max_concurrency: (0, 0),
            max_connections: (0, 0),
            c_max_reuse_times: (0, 0),
            h_max_request_times: (0, 0),
            h_max_reusable_secs: (0, 0),
        }
    }
}

impl Default for XmuxPlan {
    /// Xray's xmux when none is configured (infra/conf `SplitHTTPConfig.Build`).
    fn default() -> Self {
        XmuxPlan {
            max_connections: (3, 3),
            h_max_request_times: (600, 900),
            h_max_reusable_secs: (1800, 3000),
            ..XmuxPlan::zero()
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum StreamSecurity {
    #[default]
    None,
    Tls(TlsPlan),
    /// `security: "reality"` with `realitySettings` (built in `build/reality.rs`). Boxed: the
    /// plan is several times the size of the other variants.
    Reality(Box<RealityPlan>),
}

/// `realitySettings`, both sides in one struct as in Xray's `REALITYConfig`. Validated per
/// side: an inbound has `server` set, an outbound `client`; never both.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RealityPlan {
    /// `show`: Xray's debug output of each handshake. Logged at debug level, never secrets.
    pub show: bool,
    pub server: Option<RealityServerPlan>,
    pub client: Option<RealityClientPlan>,
}

/// The inbound's keys.
#[derive(Clone, PartialEq, Eq)]
pub struct RealityServerPlan {
    /// `target` (alias `dest`): where every connection that is not an authenticated REALITY
    /// client is forwarded, byte for byte.
    pub target: RealityTarget,
    /// `xver`: the PROXY protocol version sent to `target`, 0 (none), 1 or 2.
    pub xver: u8,
    /// `serverNames`: the SNIs an authenticated client may send (exact match, as Xray).
    pub server_names: Vec<String>,
    /// `privateKey`: the X25519 private key (32 bytes, as given: Xray does not clamp it).
    pub private_key: [u8; 32],
    /// `minClientVer` / `maxClientVer`: [major, minor, patch] from the session ID's first
    /// bytes. `min_client_ver` defaults to Xray's default, 26.3.27.
    pub min_client_ver: [u8; 3],
    pub max_client_ver: Option<[u8; 3]>,
    /// `maxTimeDiff` in milliseconds; 0 = not checked.
    pub max_time_diff_ms: u64,
    /// `shortIds`: each hex string decoded into 8 bytes, zero-padded on the right as Xray.
    pub short_ids: Vec<[u8; 8]>,
    /// `limitFallbackUpload` / `limitFallbackDownload`: Xray's rate limits on the forwarded
    /// (fallback) connection, client → target and target → client.
    pub limit_fallback_upload: RealityLimitPlan,
    pub limit_fallback_download: RealityLimitPlan,
    /// `mldsa65Seed`: the ML-DSA-65 key seed whose signature Xray 25+ adds to the temporary
    /// certificate. Refused at build time until supported (see `build/reality.rs`).
    pub mldsa65_seed: Option<[u8; 32]>,
}

/// Never prints key material.
impl std::fmt::Debug for RealityServerPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealityServerPlan")
            .field("target", &self.target)
            .field("xver", &self.xver)
            .field("server_names", &self.server_names)
            .field("private_key", &format_args!("<redacted>"))
            .field("min_client_ver", &self.min_client_ver)
            .field("max_client_ver", &self.max_client_ver)
            .field("max_time_diff_ms", &self.max_time_diff_ms)
            .field(
                "short_ids",
                &format_args!("<{} redacted>", self.short_ids.len()),
            )
            .field("limit_fallback_upload", &self.limit_fallback_upload)
            .field("limit_fallback_download", &self.limit_fallback_download)
            .field(
                "mldsa65_seed",
                &self.mldsa65_seed.map(|_| format_args!("<redacted>")),
            )
            .finish()
    }
}

/// Where a REALITY server forwards what is not for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RealityTarget {
    /// A TCP `host:port` (a bare port means `localhost:port`, as Xray).
    Tcp { host: String, port: u16 },
    /// A unix socket path; a leading `@` is Linux's abstract namespace (`@@`: the name padded
    /// with NULs to the full `sun_path` length, as Xray does for HAProxy).
    Unix(String),
}

/// One of `limitFallbackUpload` / `limitFallbackDownload`; all zero = no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RealityLimitPlan {
    /// `afterBytes`: bytes passed unlimited before the limit starts.
    pub after_bytes: u64,
    /// `bytesPerSec`: 0 = no limit.
    pub bytes_per_sec: u64,
    /// `burstBytesPerSec`: the bucket size; below `bytesPerSec` it is `bytesPerSec`.
    pub burst_bytes_per_sec: u64,
}

/// The outbound's keys.
#[derive(Clone, PartialEq, Eq)]
pub struct RealityClientPlan {
    /// `serverName`: the SNI sent; None = the server address (Xray does the same).
    pub server_name: Option<String>,
    /// `publicKey` (alias `password`): the server's X25519 public key.
    pub public_key: [u8; 32],
    /// `shortId`: hex decoded into 8 bytes, zero-padded on the right.
    pub short_id: [u8; 8],
    /// `spiderX` without the spider parameters (`p`, `c`, `t`, `i`, `r`); starts with `/`.
    pub spider_x: String,
    /// Xray's `SpiderY`: the `p`, `c`, `t`, `i`, `r` ranges of `spiderX`, each as (low, high).
    pub spider_y: [i64; 10],
    /// `fingerprint`, lower-cased; "" in the config means "chrome" (Xray's default).
    pub fingerprint: String,
    /// `mldsa65Verify`: the ML-DSA-65 public key (1952 bytes) the certificate must be signed
    /// with, when given.
    pub mldsa65_verify: Option<Vec<u8>>,
}

impl std::fmt::Debug for RealityClientPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealityClientPlan")
            .field("server_name", &self.server_name)
            .field(
                "public_key",
                &format_args!("<{} bytes>", self.public_key.len()),
            )
            .field("short_id", &format_args!("<redacted>"))
            .field("spider_x", &self.spider_x)
            .field("spider_y", &self.spider_y)
            .field("fingerprint", &self.fingerprint)
            .field(
                "mldsa65_verify",
                &self.mldsa65_verify.as_ref().map(Vec::len),
            )
            .finish()
    }
}

/// `tlsSettings`. For an inbound `certificates` is never empty; for an outbound it is always
/// empty (client certificates are not supported yet).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsPlan {
    /// `serverName`: the SNI an outbound sends and verifies; None = the destination host.
    pub server_name: Option<String>,
    /// `alpn` in config order; empty = no ALPN extension on an outbound, and Xray's default
    /// `["h2", "http/1.1"]` on an inbound (applied where the TLS server is built).
    pub alpn: Vec<String>,
    /// `minVersion` / `maxVersion`: "1.2" or "1.3" (checked), None = library default.
    pub min_version: Option<String>,
    pub max_version: Option<String>,
    /// `allowInsecure`, default false.
    pub allow_insecure: bool,
    /// `pinnedPeerCertSha256`: SHA-256 digests of accepted peer certificates (DER).
    pub pinned_peer_cert_sha256: Vec<[u8; 32]>,
    /// `rejectUnknownSni`, default false.
    pub reject_unknown_sni: bool,
    pub certificates: Vec<CertificatePlan>,
    /// `fingerprint` on an outbound, lower-cased: the browser whose ClientHello is sent;
    /// None (absent, empty or "unsafe") = skiff's own rustls hello.
    pub fingerprint: Option<String>,
}

/// One certificate chain and its private key, PEM text (files are read at load time), with
/// the files' names as written (ListInbounds reports them beside the contents, as Xray does).
#[derive(Clone, PartialEq, Eq)]
pub struct CertificatePlan {
    pub certificate_pem: String,
    pub key_pem: String,
    pub certificate_file: Option<String>,
    pub key_file: Option<String>,
}

/// Never prints key material.
impl std::fmt::Debug for CertificatePlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificatePlan")
            .field(
                "certificate_pem",
                &format_args!("<{} bytes>", self.certificate_pem.len()),
            )
            .field("key_pem", &format_args!("<redacted>"))
            .field("certificate_file", &self.certificate_file)
            .field("key_file", &self.key_file)
            .finish()
    }
}

/// VLESS inbound `settings`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VlessInbound {
    /// May be empty (then every connection fails authentication and goes to a fallback).
    pub clients: Vec<VlessClient>,
    /// In config order. Non-empty only on raw TCP inbounds, with or without TLS.
    pub fallbacks: Vec<FallbackPlan>,
}

#[derive(Clone, PartialEq, Eq)]
pub struct VlessClient {
    /// The 16-byte id: a UUID, or Xray's mapping of a 1-30 byte string.
    pub id: [u8; 16],
    /// `email`; "" is None.
    pub email: Option<String>,
    /// `level`, default 0.
    pub level: u32,
    /// `flow`.
    pub flow: VlessFlow,
}

/// A VLESS user's `flow`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum VlessFlow {
    /// "" (or absent): plain VLESS.
    #[default]
    None,
    /// `xtls-rprx-vision`.
    Vision,
    /// `xtls-rprx-vision-udp443`: Vision, and the client also carries UDP to port 443 (the
    /// wire says `xtls-rprx-vision`).
    VisionUdp443,
}

impl VlessFlow {
    pub fn is_vision(self) -> bool {
        self != VlessFlow::None
    }
}

/// Shows only the first 8 hex digits of the id.
impl std::fmt::Debug for VlessClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VlessClient")
            .field("id", &format_args!("{}…", short_id(&self.id)))
            .field("email", &self.email)
            .field("level", &self.level)
            .finish()
    }
}

/// The first 4 bytes of an id as 8 hex digits: enough to tell ids apart in output without
/// revealing them.
pub fn short_id(id: &[u8; 16]) -> String {
    id[..4].iter().map(|b| format!("{b:02x}")).collect()
}

/// One `fallbacks` entry. Selectors (`name` = SNI, `alpn`, `path`) are None when empty ("any").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FallbackPlan {
    pub name: Option<String>,
    pub alpn: Option<String>,
    /// Starts with "/".
    pub path: Option<String>,
    pub dest: FallbackDest,
    /// `xver`: PROXY protocol version sent to `dest`, 0 (none), 1 or 2.
    pub xver: u8,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FallbackDest {
    /// A bare port (number or digits string): 127.0.0.1:port.
    Port(u16),
    /// "addr:port" (IPv6 without brackets here).
    Addr(String, u16),
    /// A Unix socket path starting with "/".
    Unix(PathBuf),
    /// An abstract Unix socket, kept as written: "@name", or "@@name" (Xray pads this form
    /// with zero bytes to the full sockaddr length, for HAProxy compatibility).
    AbstractUnix(String),
}

/// VLESS outbound `settings` (one server, one user).
#[derive(Clone, PartialEq, Eq)]
pub struct VlessOutbound {
    pub address: String,
    pub port: u16,
    pub id: [u8; 16],
    pub level: u32,
    pub flow: VlessFlow,
}

/// Shows only the first 8 hex digits of the id.
impl std::fmt::Debug for VlessOutbound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VlessOutbound")
            .field("address", &self.address)
            .field("port", &self.port)
            .field("id", &format_args!("{}…", short_id(&self.id)))
            .field("level", &self.level)
            .finish()
    }
}

/// Trojan inbound `settings`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrojanInbound {
    /// May be empty (then every connection goes to a fallback).
    pub clients: Vec<TrojanClient>,
    /// In config order. Non-empty only on raw TCP inbounds, with or without TLS.
    pub fallbacks: Vec<FallbackPlan>,
}

#[derive(Clone, PartialEq, Eq)]
pub struct TrojanClient {
    /// The password as configured (non-empty); the protocol sends hex(SHA-224) of its bytes.
    pub password: String,
    /// `email`; "" is None.
    pub email: Option<String>,
    /// `level`, default 0.
    pub level: u32,
}

/// Never prints the password.
impl std::fmt::Debug for TrojanClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrojanClient")
            .field("password", &format_args!("<redacted>"))
            .field("email", &self.email)
            .field("level", &self.level)
            .finish()
    }
}

/// Trojan outbound `settings` (one server).
#[derive(Clone, PartialEq, Eq)]
pub struct TrojanOutbound {
    pub address: String,
    pub port: u16,
    pub password: String,
    pub email: Option<String>,
    pub level: u32,
}

/// Never prints the password.
impl std::fmt::Debug for TrojanOutbound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrojanOutbound")
            .field("address", &self.address)
            .field("port", &self.port)
            .field("password", &format_args!("<redacted>"))
            .field("email", &self.email)
            .field("level", &self.level)
            .finish()
    }
}

#[derive(Clone, Debug)]
pub struct VmessInbound {
    /// May be empty (then every connection fails authentication).
    pub clients: Vec<VmessClient>,
    /// v2ray's `disableInsecureEncryption`: refuse clients asking for security `none`/`zero`.
    pub disable_insecure_encryption: bool,
}

#[derive(Clone, PartialEq, Eq)]
pub struct VmessClient {
    /// The 16-byte id: a UUID, or Xray's mapping of a 1-30 byte string.
    pub id: [u8; 16],
    /// `email`; "" is None.
    pub email: Option<String>,
    /// `level`, else `default.level`, else 0.
    pub level: u32,
    /// `security` as written (lowercase): no effect on connections (the client chooses),
    /// reported by Xray's API as Xray reports it.
    pub security: Option<String>,
}

/// Shows only the first 8 hex digits of the id.
impl std::fmt::Debug for VmessClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VmessClient")
            .field("id", &format_args!("{}…", short_id(&self.id)))
            .field("email", &self.email)
            .field("level", &self.level)
            .finish()
    }
}

/// A VMess user's `security`: the body cipher the client asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VmessSecurity {
    /// AES-128-GCM where the CPU has AES instructions, else ChaCha20-Poly1305 (the default).
    Auto,
    Aes128Gcm,
    ChaCha20Poly1305,
    /// Chunked, not encrypted (v2fly; removed from Xray 26).
    None,
    /// Not even chunked (old Xray; TCP only, UDP uses `none`).
    Zero,
}

#[derive(Clone, PartialEq, Eq)]
pub struct VmessOutbound {
    pub address: String,
    pub port: u16,
    pub id: [u8; 16],
    pub security: VmessSecurity,
    pub level: u32,
    /// `experiments` contains `AuthenticatedLength`: chunk lengths are AEAD-sealed (option A).
    pub authenticated_length: bool,
    /// `experiments` contains `NoTerminationSignal`: no end-of-stream chunk.
    pub no_termination_signal: bool,
}

/// Shows only the first 8 hex digits of the id.
impl std::fmt::Debug for VmessOutbound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VmessOutbound")
            .field("address", &self.address)
            .field("port", &self.port)
            .field("id", &format_args!("{}…", short_id(&self.id)))
            .field("security", &self.security)
            .field("level", &self.level)
            .field("authenticated_length", &self.authenticated_length)
            .field("no_termination_signal", &self.no_termination_signal)
            .finish()
    }
}

pub use skiff_proto::shadowsocks::Method as ShadowsocksMethod;

/// Shadowsocks inbound `settings`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShadowsocksInbound {
    /// Never empty. AEAD-2017: every user with its own method (a request is tried against
    /// each). 2022: the one PSK, or with `identity_key` the users' keys (uPSK).
    pub users: Vec<ShadowsocksUser>,
    /// 2022 multi-user (AES methods): the server's key (`settings.password`); clients name
    /// their user with identity headers (SIP023).
    pub identity_key: Option<ShadowsocksKey>,
    /// `network`, default "tcp" (as Xray): "tcp,udp" listens on UDP too.
    pub network: Networks,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShadowsocksUser {
    pub method: ShadowsocksMethod,
    /// AEAD-2017: EVP_BytesToKey of the password; 2022: the base64-decoded PSK.
    pub key: ShadowsocksKey,
    /// The `password` as written: what a client is given (`skiff share`).
    pub password: Password,
    /// `email`; "" is None.
    pub email: Option<String>,
    pub level: u32,
}

/// A password as the config wrote it; Debug never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Password(pub String);

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<password>")
    }
}

/// Key bytes; Debug never shows them.
#[derive(Clone, PartialEq, Eq)]
pub struct ShadowsocksKey(pub Vec<u8>);

impl std::fmt::Debug for ShadowsocksKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<{}-byte key>", self.0.len())
    }
}

/// Shadowsocks outbound `settings` (one server).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShadowsocksOutbound {
    pub address: String,
    pub port: u16,
    pub method: ShadowsocksMethod,
    /// The user key (the last of a 2022 `iPSK:…:uPSK` list).
    pub key: ShadowsocksKey,
    /// 2022 identity keys in front of the user key (SIP023); empty for single-user servers.
    pub identity_keys: Vec<ShadowsocksKey>,
    pub level: u32,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RoutingDomainStrategy {
    #[default]
    AsIs,
    IpIfNonMatch,
    IpOnDemand,
}

#[derive(Clone, Debug, Default)]
pub struct RoutingPlan {
    pub domain_strategy: RoutingDomainStrategy,
    /// In config order; the first rule whose every present condition matches wins.
    pub rules: Vec<RulePlan>,
    /// `balancers`, by tag; rules name them with `balancerTag`.
    pub balancers: Vec<BalancerPlan>,
}

/// One `balancers` entry: the outbounds whose tags start with one of `selectors`, picked by
/// `strategy`; `fallback_tag` when none is there.
#[derive(Clone, Debug)]
pub struct BalancerPlan {
    pub tag: String,
    pub selectors: Vec<String>,
    pub strategy: BalancerStrategy,
    pub fallback_tag: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BalancerStrategy {
    Random,
    RoundRobin,
}

/// Where a rule sends a session: an outbound, or a balancer that picks one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RuleTarget {
    Outbound(String),
    Balancer(String),
}

/// One routing rule. Empty lists / None mean "no condition"; a rule needs at least one.
#[derive(Clone, Debug)]
pub struct RulePlan {
    pub inbound_tags: Vec<String>,
    /// `domain` as written (for `skiff check`); matching uses `domain_set`.
    pub domains: Vec<DomainEntry>,
    /// The rule's own domains and the geosite lists it names, in one matcher (shared: the
    /// router clones rules, the lists are loaded once).
    pub domain_set: Option<Arc<DomainSet>>,
    /// `ip` as written (for `skiff check`); matching uses `ip_set`.
    pub ips: Vec<IpEntry>,
    /// The rule's CIDRs and geoip lists, as Xray combines them (see [`IpMatcher`]).
    pub ip_set: Option<Arc<IpMatcher>>,
    /// `port` (destination): "53", "1000-2000", "53,443,1000-2000" or a number.
    pub ports: Vec<PortRange>,
    pub networks: Option<Networks>,
    pub sources: Vec<Cidr>,
    pub source_ports: Vec<PortRange>,
    /// `user`: emails.
    pub users: Vec<String>,
    /// `protocol`: sniffed protocol names (`http`, `tls`, `quic`), matched as prefixes as Xray.
    pub protocols: Vec<String>,
    /// `attrs`: lower-case attribute name → regular expression its value must match (HTTP
    /// attributes from sniffing: `:method`, `:path`, headers).
    pub attrs: Vec<(String, regex_lite::Regex)>,
    /// `outboundTag` or `balancerTag`: always an existing one.
    pub target: RuleTarget,
    /// `ruleTag`: a name for logs.
    pub rule_tag: Option<String>,
}

/// One entry of a rule's `domain` list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DomainEntry {
    /// `domain:`, `full:`, `keyword:` (or no prefix), `regexp:`. Names are lowercased.
    Custom(Domain),
    /// `geosite:CODE@attr…` (file `geosite.dat`), `ext:FILE:CODE`, `ext-domain:FILE:CODE`.
    Geosite {
        file: String,
        code: String,
        attrs: Vec<String>,
    },
}

/// One entry of a rule's `ip` list. `negated`: a leading `!` (or `geoip:!CODE`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IpEntry {
    Cidr {
        cidr: Cidr,
        negated: bool,
    },
    /// `geoip:CODE` (file `geoip.dat`), `ext:FILE:CODE`, `ext-ip:FILE:CODE`.
    Geoip {
        file: String,
        code: String,
        negated: bool,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LevelPolicy {
    /// Default 4 s.
    pub handshake: Duration,
    /// Default 300 s.
    pub conn_idle: Duration,
    /// Default 2 s: how long the uplink may stay idle once the downlink has closed.
    pub uplink_only: Duration,
    /// Default 5 s: how long the downlink may stay idle once the uplink has closed.
    pub downlink_only: Duration,
    pub stats_user_uplink: bool,
    pub stats_user_downlink: bool,
    /// Keep the user's online IPs (`user>>>EMAIL>>>online`).
    pub stats_user_online: bool,
}

impl Default for LevelPolicy {
    fn default() -> Self {
        LevelPolicy {
            // Xray's default since 1.8: the same as nginx's client_header_timeout, so how
            // long a silent prober waits does not tell a proxy from a web server.
            handshake: Duration::from_secs(60),
            conn_idle: Duration::from_secs(300),
            uplink_only: Duration::from_secs(2),
            downlink_only: Duration::from_secs(5),
            stats_user_uplink: false,
            stats_user_downlink: false,
            stats_user_online: false,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SystemPolicy {
    pub stats_inbound_uplink: bool,
    pub stats_inbound_downlink: bool,
    pub stats_outbound_uplink: bool,
    pub stats_outbound_downlink: bool,
}

#[derive(Clone, Debug, Default)]
pub struct PolicyPlan {
    /// `policy.levels`, keyed by level number; a level not listed uses `LevelPolicy::default()`.
    pub levels: HashMap<u32, LevelPolicy>,
    pub system: SystemPolicy,
}

impl PolicyPlan {
    pub fn level(&self, level: u32) -> LevelPolicy {
        self.levels.get(&level).copied().unwrap_or_default()
    }
}

/// kcptun inbound `settings`: a kcptun server inside skiff. Listens on UDP only.
#[derive(Clone, Debug)]
pub struct KcptunInbound {
    /// `target` "host:port" (kcptun-server's `-t`): where every smux stream goes, through
    /// the router like a dokodemo-door connection.
    pub target_host: String,
    pub target_port: u16,
    pub tuning: KcptunTuning,
}

/// kcptun outbound `settings`: a kcptun client inside skiff.
#[derive(Clone, Debug)]
pub struct KcptunOutbound {
    pub address: String,
    pub port: u16,
    /// `conn`: KCP sessions used round-robin, default 1.
    pub conn: usize,
    pub tuning: KcptunTuning,
}

/// The kcptun tuning both sides share, kcptun's defaults filled in.
#[derive(Clone, PartialEq, Eq)]
pub struct KcptunTuning {
    /// crypt, key, mode (applied), mtu, windows, FEC shards, acknodelay.
    pub kcp: skiff_kcp::KcpConfig,
    /// `crypt` as written (lowercased), for messages.
    pub crypt_name: String,
    /// `nocomp` negated: snappy framing on (kcptun's default).
    pub compress: bool,
    /// `smuxver`, 1 (default) or 2.
    pub smux_version: u8,
    /// `smuxbuf`, default 4194304.
    pub smux_buf: usize,
    /// `streambuf`, default 2097152.
    pub stream_buf: usize,
    /// `keepalive` in seconds, default 10.
    pub keepalive_secs: u32,
    /// `dscp`, default 0.
    pub dscp: u8,
    /// `sockbuf`, default 4194304.
    pub sockbuf: usize,
}

/// Never prints the key.
impl std::fmt::Debug for KcptunTuning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut kcp = self.kcp.clone();
        kcp.key = "<redacted>".into();
        f.debug_struct("KcptunTuning")
            .field("kcp", &kcp)
            .field("crypt_name", &self.crypt_name)
            .field("compress", &self.compress)
            .field("smux_version", &self.smux_version)
            .field("smux_buf", &self.smux_buf)
            .field("stream_buf", &self.stream_buf)
            .field("keepalive_secs", &self.keepalive_secs)
            .field("dscp", &self.dscp)
            .field("sockbuf", &self.sockbuf)
            .finish()
    }
}
