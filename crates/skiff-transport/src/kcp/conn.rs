//! One KCP conversation carrying one smux session, shared between its driver task and its
//! streams. The driver owns the timer and the socket input; streams read and write through
//! the smux state under the same (briefly held, never across an await) mutex and poke the
//! driver when they queued output or freed receive budget.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::ops::Deref;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Waker;
use std::time::Duration;

use skiff_kcp::KcpSession;
use skiff_kcp::smux::{Session, SmuxError};
use skiff_kcp::snappy_frame::{SnappyDecoder, SnappyEncoder};
use tokio::net::UdpSocket;
use tokio::sync::{Notify, mpsc, watch};
use tokio::time::Instant;
use tracing::debug;

use crate::udp_sessions::Queued;

use super::TunnelParams;
use super::stream::KcpStream;

/// Most streams one session serves at once; more SYNs are answered with FIN.
pub const MAX_STREAMS: usize = 4096;
/// How much of the smux output is moved into KCP at a time.
const BATCH: usize = 32 * 1024;
/// KCP receive scratch: one recv returns at most this much.
const RECV_SCRATCH: usize = 64 * 1024;
/// The longest the driver sleeps without looking (a clock sanity bound).
const MAX_SLEEP: Duration = Duration::from_secs(5);
/// Datagrams taken from the socket per wake-up before pumping.
const RECV_BATCH: usize = 64;

thread_local! {
    static RECV: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Where a session's datagrams go.
pub enum Wire {
    /// Client: a socket connected to the server.
    Connected(Arc<UdpSocket>),
    /// Server: the listener's socket, to this peer.
    To(Arc<UdpSocket>, SocketAddr),
}

impl Wire {
    fn send(&self, datagram: &[u8]) {
        // UDP: a full socket buffer drops the datagram, KCP resends it.
        let _ = match self {
            Wire::Connected(s) => s.try_send(datagram),
            Wire::To(s, peer) => s.try_send_to(datagram, *peer),
        };
    }
}

pub(crate) struct Inner {
    pub(crate) kcp: KcpSession,
    pub(crate) smux: Session,
    encoder: Option<SnappyEncoder>,
    decoder: Option<SnappyDecoder>,
    /// Encoded bytes KCP has not taken yet (`to_kcp[to_kcp_pos..]`).
    to_kcp: Vec<u8>,
    to_kcp_pos: usize,
    /// Snappy input/output scratch; given back by [`Inner::trim`] when the session idles.
    plain: Vec<u8>,
    datagram: Vec<u8>,
    pub(crate) readers: HashMap<u32, Waker>,
    pub(crate) writers: HashMap<u32, Waker>,
    pub(crate) live_streams: usize,
}

pub struct Conn {
    inner: Mutex<Inner>,
    /// Streams → driver: output queued or receive budget freed.
    pub(crate) poke: Notify,
    epoch: Instant,
    wire: Wire,
    pub peer: SocketAddr,
    dead: watch::Sender<bool>,
}

impl Conn {
    pub fn new(
        kcp: KcpSession,
        smux: Session,
        params: &TunnelParams,
        wire: Wire,
        peer: SocketAddr,
        epoch: Instant,
    ) -> Arc<Conn> {
        Arc::new(Conn {
            inner: Mutex::new(Inner {
                kcp,
                smux,
                encoder: params.compress.then(SnappyEncoder::new),
                decoder: params.compress.then(SnappyDecoder::new),
                to_kcp: Vec::new(),
                to_kcp_pos: 0,
                plain: Vec::new(),
                datagram: Vec::new(),
                readers: HashMap::new(),
                writers: HashMap::new(),
                live_streams: 0,
            }),
            poke: Notify::new(),
            epoch,
            wire,
            peer,
            dead: watch::channel(false).0,
        })
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves consistent-enough state for shutting down.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn now_ms(&self) -> u32 {
        self.epoch.elapsed().as_millis() as u32
    }

    pub fn is_dead(&self) -> bool {
        *self.dead.borrow()
    }

    /// Resolves when the session has ended.
    pub async fn closed(&self) {
        let mut rx = self.dead.subscribe();
        let _ = rx.wait_for(|d| *d).await;
    }

    pub fn stream_count(&self) -> usize {
        self.lock().live_streams
    }

    /// Opens a smux stream (client side).
    pub fn open(self: &Arc<Self>) -> io::Result<KcpStream> {
        if self.is_dead() {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "KCP session ended",
            ));
        }
        let sid = {
            let mut inner = self.lock();
            let sid = inner
                .smux
                .open()
                .map_err(|e| io::Error::new(io::ErrorKind::NotConnected, e))?;
            inner.live_streams += 1;
            sid
        };
        self.poke.notify_one();
        Ok(KcpStream::new(self.clone(), sid))
    }

    /// The session task: input from `incoming`, timer, pokes from streams; new peer streams go
    /// to `on_stream`. Returns when the session is dead (KCP gave up, smux failed or timed out)
    /// or `stop` fires.
    pub async fn drive(
        self: Arc<Self>,
        mut incoming: Incoming,
        on_stream: Option<Arc<dyn Fn(KcpStream) + Send + Sync>>,
        mut stop: watch::Receiver<bool>,
    ) {
        let sleep = tokio::time::sleep(Duration::ZERO);
        tokio::pin!(sleep);
        let mut buf = vec![0u8; 2048];
        loop {
            let wait = {
                let now = self.now_ms();
                let inner = self.lock();
                let next = inner.kcp.next_update_ms(now);
                let tick = inner.smux.next_tick_ms(now);
                let delta = (next.wrapping_sub(now) as i32).min(tick.wrapping_sub(now) as i32);
                Duration::from_millis(delta.max(0) as u64).min(MAX_SLEEP)
            };
            sleep.as_mut().reset(Instant::now() + wait);
            let mut received: Option<Datagram> = None;
            let mut timer = false;
            tokio::select! {
                biased;
                _ = stop.changed() => break,
                _ = self.poke.notified() => {}
                d = incoming.recv(&mut buf) => match d {
                    Some(d) => received = Some(d),
                    None => break,
                },
                _ = &mut sleep => timer = true,
            }
            let now = self.now_ms();
            let mut accepted = Vec::new();
            let failure = {
                let mut inner = self.lock();
                if let Some(first) = received {
                    let data = first.bytes(&buf);
                    inner.kcp.handle_datagram(data, now);
                    for _ in 1..RECV_BATCH {
                        match incoming.try_recv(&mut buf) {
                            Some(d) => {
                                let data = d.bytes(&buf);
                                inner.kcp.handle_datagram(data, now);
                            }
                            None => break,
                        }
                    }
                }
                inner.kcp.update(now);
                let ticked = inner.smux.tick(now);
                let pumped = inner.pump(&self.wire, now, &mut accepted);
                let failure = match (ticked, pumped) {
                    (Err(e), _) | (_, Err(e)) => Some(e.to_string()),
                    _ if inner.kcp.is_dead() => Some("KCP link dead (too many resends)".into()),
                    _ => None,
                };
                if let Some(why) = &failure {
                    inner.smux.fail(SmuxError::Closed);
                    debug!(peer = %self.peer, reason = %why, "KCP session ended");
                }
                inner.wake(failure.is_some());
                if timer && inner.kcp.wait_snd() == 0 {
                    inner.trim();
                }
                failure
            };
            for sid in accepted {
                match &on_stream {
                    Some(f) => f(KcpStream::new(self.clone(), sid)),
                    None => {
                        let mut inner = self.lock();
                        inner.smux.close(sid);
                        inner.live_streams = inner.live_streams.saturating_sub(1);
                    }
                }
            }
            if failure.is_some() {
                break;
            }
        }
        {
            let mut inner = self.lock();
            inner.smux.fail(SmuxError::Closed);
            inner.wake(true);
        }
        let _ = self.dead.send(true);
    }
}

impl Inner {
    /// Moves bytes both ways between KCP and smux, sends due datagrams. New peer streams are
    /// appended to `accepted` (counted as live).
    fn pump(&mut self, wire: &Wire, now: u32, accepted: &mut Vec<u32>) -> Result<(), SmuxError> {
        // KCP → (snappy) → smux, while smux has receive budget.
        // The receive scratch is per thread, not per session: pump never awaits.
        RECV.with(|scratch| -> Result<(), SmuxError> {
            let mut scratch = scratch.borrow_mut();
            if scratch.len() < RECV_SCRATCH {
                scratch.resize(RECV_SCRATCH, 0);
            }
            while self.smux.wants_input() {
                let n = self.kcp.recv(&mut scratch);
                if n == 0 {
                    break;
                }
                let data = scratch.get(..n).unwrap_or_default();
                match &mut self.decoder {
                    Some(decoder) => {
                        decoder
                            .decode(data, &mut self.plain)
                            .map_err(|_| SmuxError::Closed)?;
                        let result = self.smux.input(&self.plain, now);
                        self.plain.clear();
                        result?;
                    }
                    None => self.smux.input(data, now)?,
                }
            }
            Ok(())
        })?;
        while let Some(sid) = self.smux.accept() {
            if self.live_streams >= MAX_STREAMS {
                self.smux.close(sid);
                continue;
            }
            self.live_streams += 1;
            accepted.push(sid);
        }
        // smux → (snappy) → KCP, while KCP takes it.
        loop {
            if self.to_kcp_pos < self.to_kcp.len() {
                let n = self.kcp.send(&self.to_kcp[self.to_kcp_pos..]);
                self.to_kcp_pos += n;
                if self.to_kcp_pos < self.to_kcp.len() {
                    break;
                }
            }
            self.to_kcp.clear();
            self.to_kcp_pos = 0;
            if self.smux.pending_output() == 0 {
                break;
            }
            match &mut self.encoder {
                Some(encoder) => {
                    self.plain.clear();
                    self.smux.take_output(BATCH, &mut self.plain);
                    encoder.encode(&self.plain, &mut self.to_kcp);
                    self.plain.clear();
                }
                None => {
                    self.smux.take_output(BATCH, &mut self.to_kcp);
                }
            }
        }
        self.kcp.update(now);
        self.kcp.flush_acks(now);
        while self.kcp.poll_datagram(&mut self.datagram) {
            wire.send(&self.datagram);
        }
        Ok(())
    }

    /// Gives scratch buffers back when nothing is in flight, so idle sessions stay small.
    fn trim(&mut self) {
        if self.to_kcp.is_empty() {
            self.to_kcp = Vec::new();
        }
        self.plain = Vec::new();
        self.datagram = Vec::new();
    }

    /// Wakes the streams that can make progress (all of them when the session ended).
    pub(crate) fn wake(&mut self, all: bool) {
        let smux = &self.smux;
        self.readers.retain(|sid, waker| {
            if all || smux.readable(*sid) {
                waker.wake_by_ref();
                false
            } else {
                true
            }
        });
        self.writers.retain(|sid, waker| {
            if all || smux.writable(*sid) {
                waker.wake_by_ref();
                false
            } else {
                true
            }
        });
    }
}

/// A datagram the driver received: where it is.
pub enum Datagram {
    /// In the driver's buffer, this long.
    InBuf(usize),
    /// Handed over by a demultiplexer.
    Owned(Queued),
}

impl Datagram {
    fn bytes<'a>(&'a self, buf: &'a [u8]) -> &'a [u8] {
        match self {
            Datagram::InBuf(n) => buf.get(..*n).unwrap_or_default(),
            Datagram::Owned(b) => b.deref(),
        }
    }
}

/// Where a session's datagrams come from.
pub enum Incoming {
    /// Client: its own connected socket.
    Socket(Arc<UdpSocket>),
    /// Server: the demultiplexer's queue for this peer (bounded; full = dropped).
    Queue(mpsc::Receiver<Queued>),
}

impl Incoming {
    async fn recv(&mut self, buf: &mut [u8]) -> Option<Datagram> {
        match self {
            Incoming::Socket(s) => loop {
                match s.recv(buf).await {
                    Ok(n) => return Some(Datagram::InBuf(n)),
                    // ICMP port unreachable and the like surface here: not fatal for UDP.
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    Err(_) => return None,
                }
            },
            Incoming::Queue(rx) => rx.recv().await.map(Datagram::Owned),
        }
    }

    fn try_recv(&mut self, buf: &mut [u8]) -> Option<Datagram> {
        match self {
            Incoming::Socket(s) => s.try_recv(buf).ok().map(Datagram::InBuf),
            Incoming::Queue(rx) => rx.try_recv().ok().map(Datagram::Owned),
        }
    }
}
