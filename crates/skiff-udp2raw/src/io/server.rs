//! The server: raw packets in on `listen`, one UDP socket per conversation to `remote`.
//!
//! A fake TCP SYN from a peer without an established connection is answered with a SYN-ACK
//! and nothing is kept. A valid handshake 1 (receiver id 0) creates a connection in the
//! handshake table (bounded: `max_handshakes`, beyond which new ones are ignored, and each
//! forgotten after 10 s); a valid handshake 2 makes it ready (bounded: `max_connections`).
//! Ready connections take only safer packets with their ids and a fresh anti-replay number.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Instant;

use super::{
    CONV_TIMEOUT, Config, HEARTBEAT_INTERVAL, Handle, Inner, Link, RawSocket, SERVER_CONN_TIMEOUT,
    SERVER_HANDSHAKE_TIMEOUT, SaferSender, Stats, clock_ms, decode, encode_handshake, max_datagram,
    raw, tunnel_family,
};
use crate::headers::{self, Transport};
use crate::packet::Handshake;
use crate::{Codec, ReplayWindow, Role};

/// A client: its address and port (ICMP: the echo identifier).
type Peer = (IpAddr, u16);

struct Conv {
    sock: UdpSocket,
    last: Instant,
}

struct Conn {
    ready: bool,
    since: Instant,
    last_recv: Instant,
    last_hb: Instant,
    my_id: u32,
    peer_id: u32,
    link: Link,
    sender: SaferSender,
    replay: ReplayWindow,
    convs: HashMap<u32, Conv>,
}

/// Runs a server until `handle.stop()`; errors only when a socket cannot be opened or used.
pub fn run(cfg: &Config, handle: &Handle) -> io::Result<()> {
    let sock = RawSocket::open(tunnel_family(cfg, true))?;
    let codec = Codec::new(&cfg.password, Role::Server, cfg.cipher, cfg.auth);
    let listen_ip = cfg.listen.ip();
    let const_id = raw::random_nz();
    let start = Instant::now();
    let max_len = max_datagram(&codec, cfg.fix_gro);
    let mut conns: HashMap<Peer, Conn> = HashMap::new();
    let mut buf = vec![0u8; 65536];
    let mut last_sweep = Instant::now();
    while !handle.stopped() {
        let mut fds: Vec<RawFd> = vec![sock.recv_fd()];
        let mut owners: Vec<(Peer, u32)> = Vec::new();
        for (peer, c) in &conns {
            for (conv, v) in &c.convs {
                fds.push(v.sock.as_raw_fd());
                owners.push((*peer, *conv));
            }
        }
        let readable = raw::poll_readable(&fds, 100)?;
        let now_ms = clock_ms(start);
        if readable[0] {
            for _ in 0..1024 {
                let Some(n) = sock.recv(&mut buf)? else {
                    break;
                };
                let pkt = buf[..n].to_vec();
                on_raw(
                    cfg, handle, &sock, &codec, listen_ip, const_id, &mut conns, &pkt, now_ms,
                )?;
            }
        }
        for (i, (peer, conv)) in owners.iter().enumerate() {
            if !readable[i + 1] {
                continue;
            }
            let Some(c) = conns.get_mut(peer) else {
                continue;
            };
            for _ in 0..256 {
                let Some(v) = c.convs.get_mut(conv) else {
                    break;
                };
                let n = match v.sock.recv(&mut buf) {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(_) => continue,
                };
                v.last = Instant::now();
                Stats::bump(&handle.stats.udp_in);
                if n > max_len {
                    continue;
                }
                if let Ok(w) = c.sender.data(&codec, cfg.fix_gro, *conv, &buf[..n]) {
                    c.link.send_data(&sock, cfg.raw_mode, &w, now_ms)?;
                }
            }
        }
        // Heartbeats, expiry.
        let now = Instant::now();
        for c in conns.values_mut() {
            if c.ready && now.duration_since(c.last_hb) >= HEARTBEAT_INTERVAL {
                c.last_hb = now;
                if let Ok(w) = c.sender.heartbeat(&codec, cfg.fix_gro) {
                    c.link.send_data(&sock, cfg.raw_mode, &w, clock_ms(start))?;
                }
            }
        }
        if now.duration_since(last_sweep) > std::time::Duration::from_secs(1) {
            last_sweep = now;
            conns.retain(|_, c| {
                if c.ready {
                    now.duration_since(c.last_recv) < SERVER_CONN_TIMEOUT
                } else {
                    now.duration_since(c.since) < SERVER_HANDSHAKE_TIMEOUT
                }
            });
            for c in conns.values_mut() {
                c.convs
                    .retain(|_, v| now.duration_since(v.last) < CONV_TIMEOUT);
            }
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn on_raw(
    cfg: &Config,
    handle: &Handle,
    sock: &RawSocket,
    codec: &Codec,
    listen_ip: IpAddr,
    const_id: u32,
    conns: &mut HashMap<Peer, Conn>,
    pkt: &[u8],
    now_ms: u32,
) -> io::Result<()> {
    let Ok((ip, t)) = headers::parse_packet(cfg.raw_mode, pkt) else {
        return Ok(());
    };
    let (src, dst) = (ip.src, ip.dst);
    if src.is_ipv4() != listen_ip.is_ipv4() {
        return Ok(());
    }
    if !listen_ip.is_unspecified() && dst != listen_ip {
        return Ok(());
    }
    let peer: Peer = match &t {
        Transport::Icmp(i) => {
            if !i.request {
                return Ok(());
            }
            (src, i.id)
        }
        _ => {
            let (sp, dp) = t.ports();
            if dp != cfg.listen.port() {
                return Ok(());
            }
            (src, sp)
        }
    };
    Stats::bump(&handle.stats.raw_in);
    let payload = t.payload();
    let mode = cfg.raw_mode;
    if let Transport::Tcp(s) = &t {
        let h = s.header;
        if h.rst {
            return Ok(());
        }
        if h.syn {
            let established = conns.get(&peer).is_some_and(|c| c.ready);
            if !established && !h.ack && payload.is_empty() {
                // Stateless SYN-ACK.
                let mut l = Link::new(dst, cfg.listen.port(), src, peer.1, cfg.seq_mode, false);
                l.tcp.ack_seq = h.seq.wrapping_add(1);
                l.tcp.ts_ecr = h.timestamps.map_or(0, |t| t.0);
                l.send(sock, mode, true, true, &[], now_ms)?;
            }
            return Ok(());
        }
    }
    let icmp_seq = match &t {
        Transport::Icmp(i) => Some(i.seq),
        _ => None,
    };
    let inners = decode(codec, cfg.fix_gro, payload);
    if inners.is_empty() {
        Stats::bump(&handle.stats.raw_dropped);
        return Ok(());
    }
    let mut tcp_seen = false;
    for inner in inners {
        match inner {
            Inner::Hand(hs) => {
                let known = conns.get(&peer).map(|c| c.ready);
                match known {
                    Some(true) => continue, // established: handshakes ignored, as udp2raw
                    None => {
                        if hs.receiver_id != 0 {
                            continue;
                        }
                        let pending = conns.values().filter(|c| !c.ready).count();
                        if pending >= cfg.max_handshakes {
                            Stats::bump(&handle.stats.raw_dropped);
                            continue;
                        }
                        let now = Instant::now();
                        let my_id = raw::random_nz();
                        conns.insert(
                            peer,
                            Conn {
                                ready: false,
                                since: now,
                                last_recv: now,
                                last_hb: now,
                                my_id,
                                peer_id: 0,
                                link: Link::new(
                                    dst,
                                    cfg.listen.port(),
                                    src,
                                    peer.1,
                                    cfg.seq_mode,
                                    false,
                                ),
                                sender: SaferSender::new(my_id, 0),
                                replay: ReplayWindow::new(cfg.auth.anti_replay()),
                                convs: HashMap::new(),
                            },
                        );
                        Stats::bump(&handle.stats.handshakes);
                        Stats::max(&handle.stats.max_pending, pending as u64 + 1);
                    }
                    Some(false) => {}
                }
                let ready_count = conns.values().filter(|c| c.ready).count();
                let c = conns.get_mut(&peer).expect("inserted above");
                if let Transport::Tcp(s) = &t {
                    let h = s.header;
                    c.link.tcp.seq = h.ack_seq;
                    c.link.tcp.ack_seq = h.seq.wrapping_add(payload.len() as u32);
                    c.link.tcp.ts_ecr = h.timestamps.map_or(0, |t| t.0);
                    c.link.tcp.peer_ack = h.ack_seq;
                }
                if let Some(s) = icmp_seq {
                    c.link.icmp_seq = s;
                }
                if hs.receiver_id == 0 {
                    let w = encode_handshake(
                        codec,
                        Handshake {
                            sender_id: c.my_id,
                            receiver_id: hs.sender_id,
                            const_id,
                        },
                    )?;
                    c.link.send(sock, mode, false, true, &w, now_ms)?;
                } else if hs.receiver_id == c.my_id {
                    if ready_count >= cfg.max_connections {
                        continue;
                    }
                    c.peer_id = hs.sender_id;
                    c.ready = true;
                    c.last_recv = Instant::now();
                    c.last_hb = Instant::now();
                    c.sender = SaferSender::new(c.my_id, c.peer_id);
                    Stats::bump(&handle.stats.ready);
                    if let Ok(w) = c.sender.heartbeat(codec, cfg.fix_gro) {
                        c.link.send_data(sock, mode, &w, now_ms)?;
                    }
                }
            }
            Inner::Heartbeat {
                sender,
                receiver,
                seq,
            } => {
                let Some(c) = conns.get_mut(&peer) else {
                    continue;
                };
                if !c.ready || sender != c.peer_id || receiver != c.my_id {
                    continue;
                }
                if c.replay.check(seq).is_err() {
                    continue;
                }
                c.last_recv = Instant::now();
                c.sender.roller = c.sender.roller.wrapping_add(1);
                seen(c, &t, payload.len(), icmp_seq, &mut tcp_seen);
            }
            Inner::Data {
                sender,
                receiver,
                seq,
                conv,
                payload: data,
            } => {
                let Some(c) = conns.get_mut(&peer) else {
                    continue;
                };
                if !c.ready || sender != c.peer_id || receiver != c.my_id {
                    continue;
                }
                if c.replay.check(seq).is_err() {
                    continue;
                }
                c.last_recv = Instant::now();
                seen(c, &t, payload.len(), icmp_seq, &mut tcp_seen);
                if !c.convs.contains_key(&conv) {
                    if c.convs.len() >= cfg.max_conversations {
                        continue;
                    }
                    let bind: SocketAddr = match cfg.remote {
                        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
                        SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
                    };
                    let s = UdpSocket::bind(bind)?;
                    raw::size_udp(&s);
                    s.connect(cfg.remote)?;
                    s.set_nonblocking(true)?;
                    c.convs.insert(
                        conv,
                        Conv {
                            sock: s,
                            last: Instant::now(),
                        },
                    );
                }
                let v = c.convs.get_mut(&conv).expect("inserted above");
                v.last = Instant::now();
                if v.sock.send(&data).is_ok() {
                    Stats::bump(&handle.stats.udp_out);
                }
            }
        }
    }
    Ok(())
}

fn seen(c: &mut Conn, t: &Transport<'_>, len: usize, icmp_seq: Option<u16>, once: &mut bool) {
    if *once {
        return;
    }
    *once = true;
    if let Transport::Tcp(s) = t {
        c.link.tcp.on_received(&s.header, len);
    }
    if let Some(s) = icmp_seq {
        c.link.icmp_seq = s;
    }
}
