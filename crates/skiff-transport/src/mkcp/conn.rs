//! One mKCP connection shared by its driver task and its stream. The mutex is held briefly and
//! never across an await.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Waker;
use std::time::Duration;

use skiff_kcp::mkcp::{MkcpSession, PacketFormat};
use tokio::net::UdpSocket;
use tokio::sync::{Notify, mpsc, watch};
use tokio::time::Instant;

use crate::udp_sessions::Queued;

/// The longest the driver sleeps without looking.
const MAX_SLEEP: Duration = Duration::from_secs(5);
/// Datagrams taken per wake-up before the session is updated.
const RECV_BATCH: usize = 64;
/// Receive buffer: larger than any MTU mKCP allows.
const DATAGRAM: usize = 2048;

/// Where a connection's packets go.
pub enum Wire {
    /// Client: its own socket, connected to the server.
    Connected(Arc<UdpSocket>),
    /// Server: the listener's socket, to this peer.
    To(Arc<UdpSocket>, SocketAddr),
}

impl Wire {
    fn send(&self, datagram: &[u8]) {
        // UDP: a full socket buffer drops the packet; mKCP resends it.
        let _ = match self {
            Wire::Connected(s) => s.try_send(datagram),
            Wire::To(s, peer) => s.try_send_to(datagram, *peer),
        };
    }
}

/// Where a connection's packets come from.
pub enum Incoming {
    /// Client: its own socket; packets are opened here.
    Socket(Arc<UdpSocket>, PacketFormat),
    /// Server: the listener's queue of opened packets (bounded; full = dropped).
    Queue(mpsc::Receiver<Queued>),
}

impl Incoming {
    /// Waits for a datagram; its bytes are in `buf[..n]` (Socket) or returned (Queue).
    async fn recv(&mut self, buf: &mut [u8]) -> Option<Packet> {
        match self {
            Incoming::Socket(s, _) => loop {
                match s.recv(buf).await {
                    Ok(n) => return Some(Packet::InBuf(n)),
                    // ICMP port unreachable: the server is not up (yet); not fatal for UDP.
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    Err(_) => return None,
                }
            },
            Incoming::Queue(rx) => rx.recv().await.map(Packet::Opened),
        }
    }

    fn try_recv(&mut self, buf: &mut [u8]) -> Option<Packet> {
        match self {
            Incoming::Socket(s, _) => s.try_recv(buf).ok().map(Packet::InBuf),
            Incoming::Queue(rx) => rx.try_recv().ok().map(Packet::Opened),
        }
    }

    fn input(&self, packet: Packet, buf: &mut [u8], session: &mut MkcpSession, now: u32) {
        match (self, packet) {
            (Incoming::Socket(_, format), Packet::InBuf(n)) => {
                if let Some(datagram) = buf.get_mut(..n)
                    && let Some(plain) = format.open(datagram)
                {
                    session.input(plain, now);
                }
            }
            (_, Packet::Opened(plain)) => session.input(&plain, now),
            (Incoming::Queue(_), Packet::InBuf(_)) => {}
        }
    }
}

enum Packet {
    InBuf(usize),
    Opened(Queued),
}

pub(crate) struct Inner {
    pub(crate) session: MkcpSession,
    pub(crate) reader: Option<Waker>,
    pub(crate) writer: Option<Waker>,
    out: Vec<u8>,
}

pub struct Conn {
    inner: Mutex<Inner>,
    /// Stream → driver: data queued, window opened, or closed.
    pub(crate) poke: Notify,
    epoch: Instant,
    wire: Wire,
    pub peer: SocketAddr,
    /// The driver has stopped: reads end, writes fail.
    dead: AtomicBool,
}

impl Conn {
    pub fn new(session: MkcpSession, wire: Wire, peer: SocketAddr, epoch: Instant) -> Arc<Conn> {
        Arc::new(Conn {
            inner: Mutex::new(Inner {
                session,
                reader: None,
                writer: None,
                out: Vec::new(),
            }),
            poke: Notify::new(),
            epoch,
            wire,
            peer,
            dead: AtomicBool::new(false),
        })
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn now_ms(&self) -> u32 {
        self.epoch.elapsed().as_millis() as u32
    }

    pub fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Acquire)
    }

    /// The connection's task: returns when the session has terminated or `stop` fires.
    pub async fn drive(self: Arc<Self>, mut incoming: Incoming, mut stop: watch::Receiver<bool>) {
        let sleep = tokio::time::sleep(Duration::ZERO);
        tokio::pin!(sleep);
        let mut buf = vec![0u8; DATAGRAM];
        loop {
            let wait = {
                let now = self.now_ms();
                let next = self.lock().session.next_update_ms(now);
                let delta = next.wrapping_sub(now) as i32;
                Duration::from_millis(delta.max(0) as u64).min(MAX_SLEEP)
            };
            sleep.as_mut().reset(Instant::now() + wait);
            let mut received = None;
            tokio::select! {
                biased;
                _ = stop.changed() => break,
                _ = self.poke.notified() => {}
                p = incoming.recv(&mut buf) => match p {
                    Some(p) => received = Some(p),
                    None => break,
                },
                _ = &mut sleep => {}
            }
            let now = self.now_ms();
            let mut guard = self.lock();
            let inner = &mut *guard;
            if let Some(first) = received {
                incoming.input(first, &mut buf, &mut inner.session, now);
                for _ in 1..RECV_BATCH {
                    match incoming.try_recv(&mut buf) {
                        Some(p) => incoming.input(p, &mut buf, &mut inner.session, now),
                        None => break,
                    }
                }
            }
            inner.session.update(now);
            while inner.session.poll_datagram(&mut inner.out) {
                self.wire.send(&inner.out);
            }
            let session = &inner.session;
            if (session.readable() || session.read_finished())
                && let Some(w) = inner.reader.take()
            {
                w.wake();
            }
            if session.writable()
                && let Some(w) = inner.writer.take()
            {
                w.wake();
            }
            if session.is_terminated() {
                break;
            }
        }
        self.dead.store(true, Ordering::Release);
        let mut inner = self.lock();
        if let Some(w) = inner.reader.take() {
            w.wake();
        }
        if let Some(w) = inner.writer.take() {
            w.wake();
        }
    }
}
