//! The I/O side: a udp2raw client and server over Linux raw sockets, each a single-threaded
//! `poll` loop. The wire codec stays in the sans-IO modules; this holds the sockets, clocks,
//! the handshake and connection state machine, heartbeats, the conversation tables and the
//! firewall rules ([`rules`]). A tunnel runs over IPv4 or IPv6, the family of its server's
//! address ([`tunnel_family`]), as udp2raw's `-l`/`-r` decide it.
//!
//! Timers are udp2raw's: a handshake step is resent every second and abandoned after five;
//! heartbeats go every 600 ms; a client with no heartbeat for 10 s starts over (new id, new
//! source port); a server forgets a handshake after 10 s and a connection after 240 s of
//! silence; a conversation (one client-side UDP source address) is forgotten after 180 s.

pub mod client;
pub mod raw;
pub mod rules;
pub mod server;

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::faketcp::SeqState;
use crate::headers::{self, RawMode};
use crate::packet::{Handshake, SaferKind};
use crate::{AuthMode, CipherMode, Codec, Packet, gro};

pub use raw::RawSocket;

pub const RETRY_INTERVAL: Duration = Duration::from_millis(1000);
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_millis(5000);
pub const SERVER_HANDSHAKE_TIMEOUT: Duration = Duration::from_millis(10_000);
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(600);
pub const CLIENT_CONN_TIMEOUT: Duration = Duration::from_millis(10_000);
pub const CONV_TIMEOUT: Duration = Duration::from_secs(180);
pub const SERVER_CONN_TIMEOUT: Duration = Duration::from_secs(240);

/// What one tunnel end needs.
#[derive(Debug, Clone)]
pub struct Config {
    /// The `-k` password bytes.
    pub password: Vec<u8>,
    pub raw_mode: RawMode,
    pub cipher: CipherMode,
    pub auth: AuthMode,
    /// `--seq-mode` (0..=4).
    pub seq_mode: u8,
    pub fix_gro: bool,
    /// Client: the UDP address it listens on. Server: the raw address it answers on.
    pub listen: SocketAddr,
    /// Client: the server's raw address. Server: the UDP target.
    pub remote: SocketAddr,
    /// Conversations (UDP flows) per connection; new ones beyond are dropped.
    pub max_conversations: usize,
    /// Server: connections being set up at once (beyond: new handshakes ignored).
    pub max_handshakes: usize,
    /// Server: established connections at once.
    pub max_connections: usize,
}

impl Config {
    pub fn new(
        password: &[u8],
        raw_mode: RawMode,
        listen: SocketAddr,
        remote: SocketAddr,
    ) -> Config {
        Config {
            password: password.to_vec(),
            raw_mode,
            cipher: CipherMode::Aes128Cbc,
            auth: AuthMode::Md5,
            seq_mode: 3,
            fix_gro: false,
            listen,
            remote,
            max_conversations: 1024,
            max_handshakes: 256,
            max_connections: 128,
        }
    }
}

/// Counters a running end updates (readable from another thread).
#[derive(Debug, Default)]
pub struct Stats {
    pub raw_in: AtomicU64,
    pub raw_dropped: AtomicU64,
    pub udp_in: AtomicU64,
    pub udp_out: AtomicU64,
    /// Handshake entries created (server) or handshakes sent (client).
    pub handshakes: AtomicU64,
    /// Connections that turned ready.
    pub ready: AtomicU64,
    /// Server: the most handshake entries held at once.
    pub max_pending: AtomicU64,
}

impl Stats {
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
    fn max(c: &AtomicU64, v: u64) {
        c.fetch_max(v, Ordering::Relaxed);
    }
    fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }
}

/// A stop flag and the counters, shared with whoever runs the loop.
#[derive(Debug, Clone, Default)]
pub struct Handle {
    pub stop: Arc<AtomicBool>,
    pub stats: Arc<Stats>,
}

impl Handle {
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }
}

/// The family a tunnel runs over: its server address's (the server's `listen`, the client's
/// `remote`), as udp2raw decides it. The UDP side (the client's `listen`, the server's
/// `remote`) may be of either family.
pub fn tunnel_family(cfg: &Config, server_side: bool) -> raw::Family {
    raw::Family::of(if server_side {
        cfg.listen.ip()
    } else {
        cfg.remote.ip()
    })
}

/// The milliseconds clock TSval is read from.
pub(crate) fn clock_ms(start: Instant) -> u32 {
    start.elapsed().as_millis() as u32
}

/// The outer-header state of one fake connection (either end).
#[derive(Debug, Clone)]
pub(crate) struct Link {
    pub local: IpAddr,
    pub local_port: u16,
    pub peer: IpAddr,
    pub peer_port: u16,
    pub tcp: SeqState,
    pub icmp_seq: u16,
    pub ip_id: u16,
    /// Whether this end sends ICMP echo requests (the client) or replies.
    pub icmp_request: bool,
}

impl Link {
    pub fn new(
        local: IpAddr,
        local_port: u16,
        peer: IpAddr,
        peer_port: u16,
        seq_mode: u8,
        client: bool,
    ) -> Link {
        let mut tcp = SeqState::new(raw::random_u32(), raw::random_u32());
        tcp.mode = seq_mode;
        Link {
            local,
            local_port,
            peer,
            peer_port,
            tcp,
            icmp_seq: 0,
            ip_id: raw::random_u32() as u16,
            icmp_request: client,
        }
    }

    /// Builds and sends one packet carrying `payload`. In fake TCP, `syn`/`ack` are the flags;
    /// the sequence numbers are the link's and are not advanced here.
    pub fn send(
        &mut self,
        sock: &RawSocket,
        mode: RawMode,
        syn: bool,
        ack: bool,
        payload: &[u8],
        now_ms: u32,
    ) -> io::Result<()> {
        let (src, dst) = (self.local, self.peer);
        let mut t = Vec::with_capacity(payload.len() + 40);
        let protocol = match mode {
            RawMode::FakeTcp => {
                let h = headers::TcpHeader {
                    src_port: self.local_port,
                    dst_port: self.peer_port,
                    seq: self.tcp.seq,
                    ack_seq: self.tcp.ack_seq,
                    syn,
                    ack,
                    psh: false,
                    rst: false,
                    window: headers::WINDOW_BASE + (raw::random_u32() % 512) as u16,
                    timestamps: Some((now_ms, self.tcp.ts_ecr)),
                };
                headers::build_tcp(src, dst, &h, payload, &mut t).map_err(other)?;
                headers::IPPROTO_TCP
            }
            RawMode::Udp => {
                headers::build_udp(src, dst, self.local_port, self.peer_port, payload, &mut t)
                    .map_err(other)?;
                headers::IPPROTO_UDP
            }
            RawMode::Icmp => {
                let id = if self.icmp_request {
                    self.local_port
                } else {
                    self.peer_port
                };
                let m = headers::IcmpEcho {
                    request: self.icmp_request,
                    id,
                    seq: self.icmp_seq,
                    payload,
                };
                headers::build_icmp(src, dst, &m, &mut t).map_err(other)?;
                if src.is_ipv6() {
                    headers::IPPROTO_ICMPV6
                } else {
                    headers::IPPROTO_ICMP
                }
            }
        };
        let ip = headers::IpHeader {
            src,
            dst,
            protocol,
            ttl: headers::DEFAULT_TTL,
            id: self.ip_id,
        };
        self.ip_id = self.ip_id.wrapping_add(1);
        let mut pkt = Vec::with_capacity(t.len() + 40);
        headers::build_ip(&ip, &t, &mut pkt).map_err(other)?;
        match sock.send_to(&pkt, self.peer) {
            Ok(()) => Ok(()),
            // A full buffer drops the packet, as a network would.
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Sends a ciphertext on the current sequence numbers and moves them along.
    pub fn send_data(
        &mut self,
        sock: &RawSocket,
        mode: RawMode,
        payload: &[u8],
        now_ms: u32,
    ) -> io::Result<()> {
        self.send(sock, mode, false, true, payload, now_ms)?;
        if mode == RawMode::FakeTcp {
            self.tcp.on_sent(payload.len(), raw::random_u32());
        }
        if mode == RawMode::Icmp && self.icmp_request {
            self.icmp_seq = self.icmp_seq.wrapping_add(1);
        }
        Ok(())
    }
}

fn other(e: crate::Error) -> io::Error {
    io::Error::other(e.to_string())
}

/// A decrypted inner packet, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Inner {
    Hand(Handshake),
    Heartbeat {
        sender: u32,
        receiver: u32,
        seq: u64,
    },
    Data {
        sender: u32,
        receiver: u32,
        seq: u64,
        conv: u32,
        payload: Vec<u8>,
    },
}

fn to_inner(plain: &[u8]) -> Option<Inner> {
    match Packet::parse(plain).ok()? {
        p @ Packet::Bare { .. } => p.handshake().map(Inner::Hand),
        Packet::Safer {
            sender_id,
            receiver_id,
            seq,
            kind,
            ..
        } => Some(match kind {
            SaferKind::Heartbeat(_) => Inner::Heartbeat {
                sender: sender_id,
                receiver: receiver_id,
                seq,
            },
            SaferKind::Data { conv, payload } => Inner::Data {
                sender: sender_id,
                receiver: receiver_id,
                seq,
                conv,
                payload: payload.to_vec(),
            },
        }),
    }
}

/// Decrypts what a packet carries: a bare packet whole, safer ones whole or (`--fix-gro`)
/// frame by frame. Anything that fails to authenticate is left out.
pub(crate) fn decode(codec: &Codec, fix_gro: bool, payload: &[u8]) -> Vec<Inner> {
    let mut out = Vec::new();
    if payload.is_empty() {
        return out;
    }
    if let Ok(plain) = codec.decrypt(payload)
        && let Some(i) = to_inner(&plain)
        && (!fix_gro || matches!(i, Inner::Hand(_)))
    {
        out.push(i);
    }
    if fix_gro {
        let mut buf = payload.to_vec();
        for r in gro::split_frames(codec, &mut buf) {
            if let Ok(plain) = codec.decrypt(&buf[r])
                && let Some(i) = to_inner(&plain)
                && !matches!(i, Inner::Hand(_))
            {
                out.push(i);
            }
        }
    }
    out
}

/// The ciphertext of a bare handshake packet.
pub(crate) fn encode_handshake(codec: &Codec, hs: Handshake) -> io::Result<Vec<u8>> {
    let mut nonce = [0u8; 16];
    raw::random_bytes(&mut nonce);
    let bytes = hs.to_bytes();
    codec
        .encrypt(
            &Packet::Bare {
                nonce,
                payload: &bytes,
            }
            .to_vec(),
        )
        .map_err(other)
}

/// The bytes of a safer packet on the wire (framed under `--fix-gro`).
pub(crate) fn encode_safer(
    codec: &Codec,
    fix_gro: bool,
    p: &Packet<'_>,
) -> Result<Vec<u8>, crate::Error> {
    let c = codec.encrypt(&p.to_vec())?;
    if fix_gro {
        let mut f = Vec::with_capacity(c.len() + 2);
        gro::push_frame(codec, &c, &mut f)?;
        Ok(f)
    } else {
        Ok(c)
    }
}

/// The sending half of an established connection's safer packets.
#[derive(Debug, Clone)]
pub(crate) struct SaferSender {
    pub my_id: u32,
    pub peer_id: u32,
    pub seq: u64,
    pub roller: u8,
}

impl SaferSender {
    pub fn new(my_id: u32, peer_id: u32) -> SaferSender {
        SaferSender {
            my_id,
            peer_id,
            seq: raw::random_u64() / 10,
            roller: 0,
        }
    }

    pub fn heartbeat(&mut self, codec: &Codec, fix_gro: bool) -> Result<Vec<u8>, crate::Error> {
        self.seq += 1;
        let filler = [0u8; crate::packet::DEFAULT_HB_LEN];
        encode_safer(
            codec,
            fix_gro,
            &Packet::Safer {
                sender_id: self.my_id,
                receiver_id: self.peer_id,
                seq: self.seq,
                roller: self.roller,
                kind: SaferKind::Heartbeat(&filler),
            },
        )
    }

    pub fn data(
        &mut self,
        codec: &Codec,
        fix_gro: bool,
        conv: u32,
        payload: &[u8],
    ) -> Result<Vec<u8>, crate::Error> {
        self.seq += 1;
        encode_safer(
            codec,
            fix_gro,
            &Packet::Safer {
                sender_id: self.my_id,
                receiver_id: self.peer_id,
                seq: self.seq,
                roller: self.roller,
                kind: SaferKind::Data { conv, payload },
            },
        )
    }
}

/// The largest UDP datagram a tunnel end forwards (the peer refuses longer ciphertexts).
pub fn max_datagram(codec: &Codec, fix_gro: bool) -> usize {
    codec.max_plaintext() - crate::packet::SAFER_HEADER - 4 - if fix_gro { 2 } else { 0 }
}
