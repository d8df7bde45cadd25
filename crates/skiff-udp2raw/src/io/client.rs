//! The client: UDP in on `listen`, raw packets to the server at `remote`.
//!
//! States: (fake TCP only) SYN sent → handshake 1 sent → handshake 2 sent → ready. A step
//! is resent every second and abandoned after five (back to the start with a new id and a
//! new source port); a ready connection without a packet from the server for 10 s starts
//! over the same way. Conversations survive reconnects.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Instant;

use super::{
    CLIENT_CONN_TIMEOUT, CONV_TIMEOUT, Config, HANDSHAKE_TIMEOUT, HEARTBEAT_INTERVAL, Handle,
    Inner, Link, RETRY_INTERVAL, RawSocket, SaferSender, Stats, clock_ms, decode, encode_handshake,
    max_datagram, raw, tunnel_family,
};
use crate::headers::{self, RawMode, Transport};
use crate::packet::Handshake;
use crate::{Codec, ReplayWindow, Role};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    TcpSyn,
    Hs1,
    Hs2,
    Ready,
}

struct Conn {
    state: State,
    since: Instant,
    last_sent: Option<Instant>,
    last_recv: Instant,
    my_id: u32,
    server_id: u32,
    link: Link,
    /// fake TCP: the seq a handshake step is resent on.
    hs_seq: u32,
    sender: SaferSender,
    replay: ReplayWindow,
    /// The port-reserving socket of this source port.
    _reserve: UdpSocket,
}

/// Runs a client until `handle.stop()`; errors only when a socket cannot be opened or used.
pub fn run(cfg: &Config, handle: &Handle) -> io::Result<()> {
    run_on(cfg, handle, UdpSocket::bind(cfg.listen)?)
}

/// As [`run`], on an already bound UDP socket (`cfg.listen` is then not used).
pub fn run_on(cfg: &Config, handle: &Handle, udp: UdpSocket) -> io::Result<()> {
    let raw_sock = RawSocket::open(tunnel_family(cfg, false))?;
    udp.set_nonblocking(true)?;
    super::raw::size_udp(&udp);
    let server = cfg.remote.ip();
    let codec = Codec::new(&cfg.password, Role::Client, cfg.cipher, cfg.auth);
    run_with(cfg, handle, &raw_sock, &udp, server, &codec)
}

/// A fresh connection attempt: new id, new source port (reserved by binding a UDP socket
/// to it, so no other local flow takes it), new sequence numbers.
fn new_conn(cfg: &Config, server: IpAddr) -> io::Result<Conn> {
    // The source address the kernel's routing picks towards the server.
    let any: IpAddr = match server {
        IpAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
        IpAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
    };
    let probe = UdpSocket::bind((any, 0))?;
    probe.connect((server, cfg.remote.port()))?;
    let local = probe.local_addr()?.ip();
    let reserve = UdpSocket::bind((local, 0))?;
    let port = reserve.local_addr()?.port();
    let now = Instant::now();
    let my_id = raw::random_nz();
    Ok(Conn {
        state: if cfg.raw_mode == RawMode::FakeTcp {
            State::TcpSyn
        } else {
            State::Hs1
        },
        since: now,
        last_sent: None,
        last_recv: now,
        my_id,
        server_id: 0,
        link: Link::new(local, port, server, cfg.remote.port(), cfg.seq_mode, true),
        hs_seq: 0,
        sender: SaferSender::new(my_id, 0),
        replay: ReplayWindow::new(cfg.auth.anti_replay()),
        _reserve: reserve,
    })
}

struct Convs {
    by_addr: HashMap<SocketAddr, u32>,
    by_conv: HashMap<u32, (SocketAddr, Instant)>,
}

fn run_with(
    cfg: &Config,
    handle: &Handle,
    sock: &RawSocket,
    udp: &UdpSocket,
    server: IpAddr,
    codec: &Codec,
) -> io::Result<()> {
    let start = Instant::now();
    let const_id = raw::random_nz();
    let max_len = max_datagram(codec, cfg.fix_gro);
    let mut conn = new_conn(cfg, server)?;
    let mut convs = Convs {
        by_addr: HashMap::new(),
        by_conv: HashMap::new(),
    };
    let mut buf = vec![0u8; 65536];
    let mut last_sweep = Instant::now();
    while !handle.stopped() {
        let ready = raw::poll_readable(&[sock.recv_fd(), udp.as_raw_fd()], 100)?;
        let now_ms = clock_ms(start);
        if ready[0] {
            for _ in 0..1024 {
                let Some(n) = sock.recv(&mut buf)? else {
                    break;
                };
                on_raw(cfg, handle, udp, codec, &mut conn, &convs, &buf[..n])?;
            }
        }
        if ready[1] {
            for _ in 0..1024 {
                let (n, from) = match udp.recv_from(&mut buf) {
                    Ok(x) => x,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
                    Err(e) => return Err(e),
                };
                Stats::bump(&handle.stats.udp_in);
                if n > max_len {
                    continue;
                }
                let conv = match convs.by_addr.get(&from) {
                    Some(&c) => c,
                    None => {
                        if convs.by_addr.len() >= cfg.max_conversations {
                            continue;
                        }
                        let mut c = raw::random_nz();
                        while convs.by_conv.contains_key(&c) {
                            c = raw::random_nz();
                        }
                        convs.by_addr.insert(from, c);
                        c
                    }
                };
                convs.by_conv.insert(conv, (from, Instant::now()));
                if conn.state == State::Ready
                    && let Ok(w) = conn.sender.data(codec, cfg.fix_gro, conv, &buf[..n])
                {
                    conn.link.send_data(sock, cfg.raw_mode, &w, now_ms)?;
                }
            }
        }
        on_timer(
            cfg,
            handle,
            sock,
            codec,
            &mut conn,
            const_id,
            server,
            clock_ms(start),
        )?;
        if last_sweep.elapsed() > std::time::Duration::from_secs(1) {
            last_sweep = Instant::now();
            let stale: Vec<u32> = convs
                .by_conv
                .iter()
                .filter(|(_, (_, t))| t.elapsed() > CONV_TIMEOUT)
                .map(|(&c, _)| c)
                .collect();
            for c in stale {
                if let Some((a, _)) = convs.by_conv.remove(&c) {
                    convs.by_addr.remove(&a);
                }
            }
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn on_timer(
    cfg: &Config,
    handle: &Handle,
    sock: &RawSocket,
    codec: &Codec,
    conn: &mut Conn,
    const_id: u32,
    server: IpAddr,
    now_ms: u32,
) -> io::Result<()> {
    let now = Instant::now();
    let timed_out = match conn.state {
        State::Ready => now.duration_since(conn.last_recv) > CLIENT_CONN_TIMEOUT,
        _ => now.duration_since(conn.since) > HANDSHAKE_TIMEOUT,
    };
    if timed_out {
        *conn = new_conn(cfg, server)?;
    }
    let due = |every| {
        conn.last_sent
            .is_none_or(|t| now.duration_since(t) >= every)
    };
    let mode = cfg.raw_mode;
    match conn.state {
        State::TcpSyn if due(RETRY_INTERVAL) => {
            if conn.last_sent.is_none() {
                conn.link.tcp.seq = raw::random_u32();
                conn.link.tcp.ack_seq = raw::random_u32();
                conn.link.tcp.ts_ecr = 0;
            }
            conn.link.send(sock, mode, true, false, &[], now_ms)?;
            conn.last_sent = Some(now);
        }
        State::Hs1 if due(RETRY_INTERVAL) => {
            let w = encode_handshake(
                codec,
                Handshake {
                    sender_id: conn.my_id,
                    receiver_id: 0,
                    const_id,
                },
            )?;
            if mode == RawMode::FakeTcp {
                conn.link.tcp.seq = conn.hs_seq;
                conn.link.send(sock, mode, false, true, &[], now_ms)?;
                conn.link.send(sock, mode, false, true, &w, now_ms)?;
                conn.link.tcp.seq = conn.hs_seq.wrapping_add(w.len() as u32);
            } else {
                conn.link.send_data(sock, mode, &w, now_ms)?;
            }
            Stats::bump(&handle.stats.handshakes);
            conn.last_sent = Some(now);
        }
        State::Hs2 if due(RETRY_INTERVAL) => {
            let w = encode_handshake(
                codec,
                Handshake {
                    sender_id: conn.my_id,
                    receiver_id: conn.server_id,
                    const_id,
                },
            )?;
            if mode == RawMode::FakeTcp {
                conn.link.tcp.seq = conn.hs_seq;
                conn.link.send(sock, mode, false, true, &w, now_ms)?;
                conn.link.tcp.seq = conn.hs_seq.wrapping_add(w.len() as u32);
            } else {
                conn.link.send_data(sock, mode, &w, now_ms)?;
            }
            conn.last_sent = Some(now);
        }
        State::Ready if due(HEARTBEAT_INTERVAL) => {
            if let Ok(w) = conn.sender.heartbeat(codec, cfg.fix_gro) {
                conn.link.send_data(sock, mode, &w, now_ms)?;
            }
            conn.last_sent = Some(now);
        }
        _ => {}
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn on_raw(
    cfg: &Config,
    handle: &Handle,
    udp: &UdpSocket,
    codec: &Codec,
    conn: &mut Conn,
    convs: &Convs,
    pkt: &[u8],
) -> io::Result<()> {
    let Ok((ip, t)) = headers::parse_packet(cfg.raw_mode, pkt) else {
        return Ok(());
    };
    if ip.src != conn.link.peer || ip.dst != conn.link.local {
        return Ok(());
    }
    let ours = match &t {
        Transport::Icmp(i) => !i.request && i.id == conn.link.local_port,
        _ => t.ports() == (conn.link.peer_port, conn.link.local_port),
    };
    if !ours {
        return Ok(());
    }
    Stats::bump(&handle.stats.raw_in);
    let payload = t.payload();
    if let Transport::Tcp(s) = &t {
        let h = s.header;
        if h.rst {
            return Ok(());
        }
        if conn.state == State::TcpSyn {
            if h.syn
                && h.ack
                && payload.is_empty()
                && h.ack_seq == conn.link.tcp.seq.wrapping_add(1)
            {
                conn.link.tcp.seq = h.ack_seq;
                conn.hs_seq = h.ack_seq;
                conn.link.tcp.ack_seq = h.seq.wrapping_add(1);
                conn.link.tcp.ts_ecr = h.timestamps.map_or(0, |t| t.0);
                conn.link.tcp.peer_ack = h.ack_seq;
                conn.state = State::Hs1;
                conn.since = Instant::now();
                conn.last_sent = None;
            }
            return Ok(());
        }
        if h.syn {
            return Ok(());
        }
    }
    let mut tcp_seen = false;
    for inner in decode(codec, cfg.fix_gro, payload) {
        match (conn.state, inner) {
            (State::Hs1, Inner::Hand(hs)) if hs.receiver_id == conn.my_id => {
                if let Transport::Tcp(s) = &t {
                    let h = s.header;
                    if h.ack_seq != conn.link.tcp.seq || h.seq != conn.link.tcp.ack_seq {
                        continue;
                    }
                    conn.link.tcp.ack_seq = h.seq.wrapping_add(payload.len() as u32);
                    conn.link.tcp.ts_ecr = h.timestamps.map_or(0, |t| t.0);
                    conn.link.tcp.peer_ack = h.ack_seq;
                    conn.hs_seq = conn.link.tcp.seq;
                }
                conn.server_id = hs.sender_id;
                conn.state = State::Hs2;
                conn.since = Instant::now();
                conn.last_sent = None;
                conn.last_recv = Instant::now();
            }
            (
                State::Hs2 | State::Ready,
                Inner::Heartbeat {
                    sender,
                    receiver,
                    seq,
                },
            ) if sender == conn.server_id && receiver == conn.my_id => {
                if conn.replay.check(seq).is_err() {
                    continue;
                }
                if conn.state == State::Hs2 {
                    conn.state = State::Ready;
                    conn.sender = SaferSender::new(conn.my_id, conn.server_id);
                    conn.last_sent = None;
                    Stats::bump(&handle.stats.ready);
                }
                conn.sender.roller = conn.sender.roller.wrapping_add(1);
                conn.last_recv = Instant::now();
                seen_tcp(conn, &t, payload.len(), &mut tcp_seen);
            }
            (
                State::Ready,
                Inner::Data {
                    sender,
                    receiver,
                    seq,
                    conv,
                    payload: data,
                },
            ) if sender == conn.server_id && receiver == conn.my_id => {
                if conn.replay.check(seq).is_err() {
                    continue;
                }
                conn.last_recv = Instant::now();
                seen_tcp(conn, &t, payload.len(), &mut tcp_seen);
                if let Some((addr, _)) = convs.by_conv.get(&conv)
                    && udp.send_to(&data, addr).is_ok()
                {
                    Stats::bump(&handle.stats.udp_out);
                }
            }
            _ => Stats::bump(&handle.stats.raw_dropped),
        }
    }
    Ok(())
}

/// Moves the fake TCP numbers along, once per received segment.
fn seen_tcp(conn: &mut Conn, t: &Transport<'_>, len: usize, once: &mut bool) {
    if std::mem::replace(once, true) {
        return;
    }
    if let Transport::Tcp(s) = t {
        conn.link.tcp.on_received(&s.header, len);
    }
}
