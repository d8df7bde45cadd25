//! One Mux.Cool connection, either end: the frame codec (`frame.rs`) with async edges. A
//! reader task parses frames and hands each sub-connection's data to that sub-connection; a
//! writer task sends the frames every sub-connection produces, in the order they produce
//! them. Sub-connections are [`SubStream`]s (TCP) or datagram halves (UDP, XUDP).
//!
//! Flow control. Mux.Cool has no per-session window: when one sub-connection's destination
//! reads slower than its client sends, the only choices are to stop reading the connection
//! (every other sub-connection waits too) or to give up on that sub-connection. Xray stops
//! reading, for as long as it takes (its pipe blocks the worker's only reader). Skiff buffers
//! up to [`Limits::session_buffer`] bytes per sub-connection, then waits as Xray does, but at
//! most [`Limits::stall`] for one frame: a destination that takes longer loses its
//! sub-connection (an End frame with the error option), and the others go on. UDP data that
//! finds its sub-connection's buffer full is dropped at once, as a UDP socket would.
//!
//! End frames half-close: the first End for a sub-connection ends its incoming direction
//! only; its outgoing data still flows until its own side ends. (Xray ends the whole
//! sub-connection on End: its client, which sends End when its local reader ends, then
//! answers our further data with End, which Skiff takes as the sub-connection's reset.) An
//! End with the error option, or a second End, resets it.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use skiff_core::datagram::{DatagramRecv, DatagramSend};
use skiff_core::{Address, BoxStream, ProxyStream};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio::time::timeout;
use tracing::{debug, warn};

use super::frame::{
    self, Frame, NETWORK_TCP, NETWORK_UDP, OPTION_DATA, OPTION_ERROR, STATUS_END, STATUS_KEEP,
    STATUS_KEEP_ALIVE, STATUS_NEW, encode_end, encode_keep, encode_new, encode_udp_keep,
    parse_frame,
};

/// The bounds one Mux.Cool connection runs under.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Sub-connections open at once; a New frame past this is refused with an error End.
    pub max_sessions: usize,
    /// Bytes received for one sub-connection and not yet taken by it.
    pub session_buffer: usize,
    /// How long the reader waits for room in one sub-connection's buffer before ending it.
    pub stall: Duration,
    /// How long a connection without sub-connections stays open.
    pub idle: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            // Xray clients open 8 by default (`concurrency`), XUDP 16; Xray's own maximum
            // per connection is 128 (`MaxConnection`, counted over the connection's life).
            max_sessions: 128,
            session_buffer: 256 * 1024,
            stall: Duration::from_secs(4),
            // Xray's server closes a connection without sessions after one to two minutes.
            idle: Duration::from_secs(120),
        }
    }
}

/// The data a single Keep frame carries at most when we send: Xray's own buffers are 8 KiB;
/// larger frames cost fewer headers and writes.
const SEND_CHUNK: usize = 16 * 1024;
/// Frames waiting for the writer; every sub-connection shares this queue, so it bounds what
/// a connection buffers towards its peer.
const WRITE_QUEUE: usize = 64;
/// Frames the reader and dropped sub-connections queue for the writer (see `Shared::control`).
const CONTROL_QUEUE: usize = 1024;
/// The writer gathers queued frames into one write up to this size.
const WRITE_BATCH: usize = 64 * 1024;

/// The domain Mux.Cool connections are addressed to (VLESS/VMess command Mux imply it; other
/// protocols, such as Trojan, carry it as an ordinary destination).
pub const MUX_COOL_DOMAIN: &str = "v1.mux.cool";
/// The port Xray's clients send with it.
pub const MUX_COOL_PORT: u16 = 9527;

/// True when `destination` names a Mux.Cool connection rather than a real destination.
pub fn is_mux_cool(destination: &Address) -> bool {
    matches!(destination, Address::Domain(name, _) if name.eq_ignore_ascii_case(MUX_COOL_DOMAIN))
}

fn invalid(msg: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("Mux: {msg}"))
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "Mux connection closed")
}

/// What the reader hands a sub-connection.
enum Up {
    Data(Bytes, Option<OwnedSemaphorePermit>),
    /// The peer ended its direction (half-close).
    Eof,
    /// The peer reset the sub-connection, or it was given up on.
    Reset,
}

struct Entry {
    up: mpsc::UnboundedSender<Up>,
    budget: Arc<Semaphore>,
    generation: u64,
    /// A UDP sub-connection's destination: datagrams addressed elsewhere are dropped.
    udp: Option<Address>,
    peer_ended: bool,
}

#[derive(Default)]
struct Table {
    entries: HashMap<u16, Entry>,
    next_generation: u64,
    /// Client side: the last session id given out.
    last_id: u16,
    /// Client side: sub-connections opened over the connection's life.
    opened: usize,
    closed: bool,
}

struct Shared {
    table: Mutex<Table>,
    /// Frames in the order sub-connections produce them.
    data: mpsc::Sender<Bytes>,
    /// Frames the reader sends itself (refusals, answers to unknown sessions) and error Ends
    /// of dropped sub-connections. Bounded: a peer that sends frames and never reads the
    /// answers stalls its own reader instead of growing this queue.
    control: mpsc::Sender<Bytes>,
    limits: Limits,
}

impl Shared {
    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn send_end(&self, session: u16, error: bool) {
        let mut end = Vec::with_capacity(6);
        encode_end(&mut end, session, error);
        let _ = self.control.send(Bytes::from(end)).await;
    }

    /// Registers a sub-connection and builds its two halves.
    fn register(
        self: &Arc<Self>,
        table: &mut Table,
        id: u16,
        udp: Option<Address>,
    ) -> (SubRecv, SubSend) {
        let (tx, rx) = mpsc::unbounded_channel();
        let generation = table.next_generation;
        table.next_generation += 1;
        table.entries.insert(
            id,
            Entry {
                up: tx,
                budget: Arc::new(Semaphore::new(self.limits.session_buffer)),
                generation,
                udp: udp.clone(),
                peer_ended: false,
            },
        );
        let registration = Arc::new(Registration {
            shared: self.clone(),
            id,
            generation,
        });
        let recv = SubRecv {
            rx,
            current: None,
            finished: false,
            _registration: registration.clone(),
        };
        let send = SubSend {
            shared: self.clone(),
            id,
            reserving: None,
            ended: false,
            udp_source: udp,
            _registration: registration,
        };
        (recv, send)
    }

    /// Ends every sub-connection: the connection itself is gone.
    fn close_all(&self) {
        let mut table = self.table();
        table.closed = true;
        for (_, entry) in table.entries.drain() {
            let _ = entry.up.send(Up::Reset);
        }
    }
}

/// Removes a sub-connection from the table once both its halves are gone.
struct Registration {
    shared: Arc<Shared>,
    id: u16,
    generation: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut table = self.shared.table();
        if table
            .entries
            .get(&self.id)
            .is_some_and(|e| e.generation == self.generation)
        {
            table.entries.remove(&self.id);
        }
    }
}

/// A sub-connection opened by the peer.
pub enum Incoming {
    Stream {
        destination: Address,
        stream: SubStream,
    },
    Datagrams {
        destination: Address,
        recv: SubDatagramRecv,
        send: SubDatagramSend,
    },
}

/// Serves the server end of a Mux.Cool connection until the peer closes it, it fails, or it
/// stays without sub-connections for [`Limits::idle`]. `open` runs each sub-connection the
/// peer opens (routing and relaying it); those tasks end with the connection. `peer` names
/// the connection in log lines.
pub async fn serve<F>(stream: BoxStream, limits: Limits, peer: &str, mut open: F) -> io::Result<()>
where
    F: FnMut(Incoming) -> Pin<Box<dyn Future<Output = ()> + Send + 'static>> + Send,
{
    let (shared, reader, writer) = start(stream, limits);
    let mut tasks = JoinSet::new();
    let mut on_new = |incoming: Incoming| {
        while tasks.try_join_next().is_some() {}
        tasks.spawn(open(incoming));
    };
    let result = tokio::select! {
        r = read_frames(&shared, reader, Role::Server { peer, on_new: &mut on_new }) => r,
        r = writer => r,
    };
    shared.close_all();
    // Dropping the set aborts the sub-connections still relaying.
    drop(tasks);
    result
}

type WriterTask = Pin<Box<dyn Future<Output = io::Result<()>> + Send>>;

fn start(
    stream: BoxStream,
    limits: Limits,
) -> (Arc<Shared>, tokio::io::ReadHalf<BoxStream>, WriterTask) {
    let (data_tx, data_rx) = mpsc::channel(WRITE_QUEUE);
    let (control_tx, control_rx) = mpsc::channel(CONTROL_QUEUE);
    let shared = Arc::new(Shared {
        table: Mutex::new(Table::default()),
        data: data_tx,
        control: control_tx,
        limits,
    });
    let (read, write) = tokio::io::split(stream);
    let writer = Box::pin(write_frames(write, control_rx, data_rx));
    (shared, read, writer)
}

async fn write_frames(
    mut out: tokio::io::WriteHalf<BoxStream>,
    mut control: mpsc::Receiver<Bytes>,
    mut data: mpsc::Receiver<Bytes>,
) -> io::Result<()> {
    let mut batch = Vec::with_capacity(WRITE_BATCH);
    loop {
        let first = tokio::select! {
            biased;
            Some(f) = control.recv() => f,
            Some(f) = data.recv() => f,
            else => return Ok(()),
        };
        batch.extend_from_slice(&first);
        while batch.len() < WRITE_BATCH {
            match control.try_recv().or_else(|_| data.try_recv()) {
                Ok(f) => batch.extend_from_slice(&f),
                Err(_) => break,
            }
        }
        out.write_all(&batch).await?;
        batch.clear();
        if control.is_empty() && data.is_empty() {
            out.flush().await?;
        }
    }
}

enum Role<'a> {
    Server {
        peer: &'a str,
        on_new: &'a mut (dyn FnMut(Incoming) + Send),
    },
    Client,
}

async fn read_frames(
    shared: &Arc<Shared>,
    mut reader: tokio::io::ReadHalf<BoxStream>,
    mut role: Role<'_>,
) -> io::Result<()> {
    let mut buf = BytesMut::with_capacity(16 * 1024);
    let mut warned = false;
    loop {
        while let Some((frame, len)) = parse_frame(&buf).map_err(invalid)? {
            let bytes = buf.split_to(len).freeze();
            let data = bytes.slice(frame.data.clone());
            handle(shared, frame, data, &mut role, &mut warned).await?;
        }
        if buf.capacity() - buf.len() < 4096 {
            buf.reserve(16 * 1024);
        }
        let idle = shared.table().entries.is_empty();
        let n = if idle {
            match timeout(shared.limits.idle, reader.read_buf(&mut buf)).await {
                Ok(n) => n?,
                Err(_) => {
                    debug!("Mux connection idle without sub-connections; closing");
                    return Ok(());
                }
            }
        } else {
            reader.read_buf(&mut buf).await?
        };
        if n == 0 {
            if buf.is_empty() {
                return Ok(());
            }
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "Mux: connection closed inside a frame",
            ));
        }
    }
}

async fn handle(
    shared: &Arc<Shared>,
    frame: Frame,
    data: Bytes,
    role: &mut Role<'_>,
    warned: &mut bool,
) -> io::Result<()> {
    let has_data = frame.option & OPTION_DATA != 0 && !data.is_empty();
    match frame.status {
        STATUS_NEW => {
            let Role::Server { peer, on_new } = role else {
                // Only clients open sub-connections.
                shared.send_end(frame.session, true).await;
                return Ok(());
            };
            let (Some(network), Some(destination)) = (frame.network, frame.address.clone()) else {
                return Err(invalid("New frame without a destination"));
            };
            if network != NETWORK_TCP && network != NETWORK_UDP {
                shared.send_end(frame.session, true).await;
                return Ok(());
            }
            let opened = {
                let mut table = shared.table();
                let open = table.entries.len();
                if open >= shared.limits.max_sessions {
                    Err(Some(open))
                } else if table.entries.contains_key(&frame.session) {
                    Err(None)
                } else {
                    let udp = (network == NETWORK_UDP).then(|| destination.clone());
                    Ok(shared.register(&mut table, frame.session, udp))
                }
            };
            let (recv, send) = match opened {
                Ok(halves) => halves,
                Err(Some(open)) => {
                    if !*warned {
                        *warned = true;
                        warn!(
                            %peer,
                            "Mux connection has {open} sub-connections open, the most one connection may have; refusing more on it"
                        );
                    }
                    shared.send_end(frame.session, true).await;
                    return Ok(());
                }
                Err(None) => {
                    debug!(%peer, session = frame.session, "Mux New frame for a session already open; refused");
                    shared.send_end(frame.session, true).await;
                    return Ok(());
                }
            };
            let incoming = if network == NETWORK_UDP {
                Incoming::Datagrams {
                    destination,
                    recv: SubDatagramRecv(recv),
                    send: SubDatagramSend(send),
                }
            } else {
                Incoming::Stream {
                    destination,
                    stream: SubStream { recv, send },
                }
            };
            on_new(incoming);
            if has_data {
                deliver(shared, frame.session, None, data).await;
            }
        }
        STATUS_KEEP => {
            if !has_data {
                return Ok(());
            }
            let known = shared.table().entries.contains_key(&frame.session);
            if known {
                deliver(shared, frame.session, frame.address.as_ref(), data).await;
            } else {
                // As Xray: tell the peer this session is gone.
                shared.send_end(frame.session, false).await;
            }
        }
        STATUS_END => {
            let mut table = shared.table();
            let reset = frame.option & OPTION_ERROR != 0;
            if let Some(entry) = table.entries.get_mut(&frame.session) {
                if reset || entry.peer_ended || entry.udp.is_some() {
                    let _ = entry.up.send(Up::Reset);
                    table.entries.remove(&frame.session);
                } else {
                    entry.peer_ended = true;
                    let _ = entry.up.send(Up::Eof);
                }
            }
        }
        STATUS_KEEP_ALIVE => {}
        other => return Err(invalid(format!("frame status {other}"))),
    }
    Ok(())
}

/// Hands `data` to its sub-connection, waiting at most [`Limits::stall`] for room (TCP) or
/// not at all (UDP).
async fn deliver(shared: &Arc<Shared>, session: u16, address: Option<&Address>, data: Bytes) {
    let (budget, generation, udp) = {
        let table = shared.table();
        let Some(entry) = table.entries.get(&session) else {
            return;
        };
        if entry.peer_ended {
            return;
        }
        (entry.budget.clone(), entry.generation, entry.udp.is_some())
    };
    let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
    let permit = if udp {
        let table = shared.table();
        let entry = &table.entries[&session];
        if address.is_some_and(|a| Some(a) != entry.udp.as_ref()) {
            // A datagram for another destination on the same XUDP session (full cone):
            // not served.
            return;
        }
        drop(table);
        match budget.try_acquire_many_owned(len) {
            Ok(p) => p,
            Err(_) => return,
        }
    } else {
        match timeout(shared.limits.stall, budget.acquire_many_owned(len)).await {
            Ok(Ok(p)) => p,
            _ => {
                debug!(
                    session,
                    "Mux sub-connection's destination took no data for {:?}; ending it",
                    shared.limits.stall
                );
                let removed = {
                    let mut table = shared.table();
                    let ours = table
                        .entries
                        .get(&session)
                        .is_some_and(|e| e.generation == generation);
                    ours.then(|| table.entries.remove(&session)).flatten()
                };
                if let Some(entry) = removed {
                    let _ = entry.up.send(Up::Reset);
                    shared.send_end(session, true).await;
                }
                return;
            }
        }
    };
    let table = shared.table();
    if let Some(entry) = table.entries.get(&session)
        && entry.generation == generation
    {
        let _ = entry.up.send(Up::Data(data, Some(permit)));
    }
}

/// The receiving half of a sub-connection.
pub struct SubRecv {
    rx: mpsc::UnboundedReceiver<Up>,
    current: Option<(Bytes, Option<OwnedSemaphorePermit>)>,
    finished: bool,
    _registration: Arc<Registration>,
}

impl SubRecv {
    /// The next chunk as it came in one frame.
    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Option<Bytes>>> {
        if let Some((bytes, _permit)) = self.current.take() {
            return Poll::Ready(Ok(Some(bytes)));
        }
        if self.finished {
            return Poll::Ready(Ok(None));
        }
        match ready!(self.rx.poll_recv(cx)) {
            Some(Up::Data(bytes, _permit)) => Poll::Ready(Ok(Some(bytes))),
            Some(Up::Eof) => {
                self.finished = true;
                Poll::Ready(Ok(None))
            }
            Some(Up::Reset) | None => {
                self.finished = true;
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::ConnectionReset,
                    "Mux sub-connection reset",
                )))
            }
        }
    }

    fn poll_read_into(
        &mut self,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            if let Some((bytes, _permit)) = &mut self.current {
                let n = bytes.len().min(out.remaining());
                out.put_slice(&bytes[..n]);
                bytes.advance(n);
                if bytes.is_empty() {
                    // Frees the chunk's room in the sub-connection's buffer.
                    self.current = None;
                }
                return Poll::Ready(Ok(()));
            }
            if self.finished {
                return Poll::Ready(Ok(()));
            }
            match ready!(self.rx.poll_recv(cx)) {
                Some(Up::Data(bytes, permit)) => self.current = Some((bytes, permit)),
                Some(Up::Eof) => self.finished = true,
                Some(Up::Reset) | None => {
                    self.finished = true;
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::ConnectionReset,
                        "Mux sub-connection reset",
                    )));
                }
            }
        }
    }
}

type Reserving = Pin<
    Box<dyn Future<Output = Result<mpsc::OwnedPermit<Bytes>, mpsc::error::SendError<()>>> + Send>,
>;

/// The sending half of a sub-connection.
pub struct SubSend {
    shared: Arc<Shared>,
    id: u16,
    reserving: Option<Reserving>,
    ended: bool,
    /// UDP: replies are framed as coming from the sub-connection's destination.
    udp_source: Option<Address>,
    _registration: Arc<Registration>,
}

impl SubSend {
    fn poll_reserve(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<mpsc::OwnedPermit<Bytes>>> {
        let data = &self.shared.data;
        let reserving = self
            .reserving
            .get_or_insert_with(|| Box::pin(data.clone().reserve_owned()));
        let result = ready!(reserving.as_mut().poll(cx));
        self.reserving = None;
        Poll::Ready(result.map_err(|_| closed()))
    }

    fn poll_end(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if !self.ended {
            let permit = ready!(self.poll_reserve(cx))?;
            let mut end = Vec::with_capacity(6);
            encode_end(&mut end, self.id, false);
            permit.send(Bytes::from(end));
            self.ended = true;
        }
        Poll::Ready(Ok(()))
    }
}

impl Drop for SubSend {
    fn drop(&mut self) {
        if !self.ended {
            // Ended without a shutdown (a failed connect, a relay error): an error End.
            let mut end = Vec::with_capacity(6);
            encode_end(&mut end, self.id, true);
            let end = Bytes::from(end);
            if let Err(mpsc::error::TrySendError::Full(end)) = self.shared.data.try_send(end)
                && let Err(mpsc::error::TrySendError::Full(end)) = self.shared.control.try_send(end)
                && let Ok(runtime) = tokio::runtime::Handle::try_current()
            {
                // Both queues full: the End waits for room on its own.
                let data = self.shared.data.clone();
                runtime.spawn(async move {
                    let _ = data.send(end).await;
                });
            }
        }
    }
}

/// A TCP sub-connection as a byte stream.
pub struct SubStream {
    recv: SubRecv,
    send: SubSend,
}

impl AsyncRead for SubStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.recv.poll_read_into(cx, buf)
    }
}

impl AsyncWrite for SubStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.send.ended {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "Mux sub-connection already ended",
            )));
        }
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let permit = ready!(self.send.poll_reserve(cx))?;
        let n = buf.len().min(SEND_CHUNK);
        let mut out = Vec::with_capacity(n + 8);
        encode_keep(&mut out, self.send.id, &buf[..n]);
        permit.send(Bytes::from(out));
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // The writer task flushes whenever its queue runs empty.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.send.poll_end(cx)
    }
}

impl ProxyStream for SubStream {}

/// A UDP sub-connection's receiving half: one datagram per frame.
pub struct SubDatagramRecv(SubRecv);

impl DatagramRecv for SubDatagramRecv {
    fn poll_recv_datagram(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Option<Bytes>>> {
        match ready!(self.0.poll_chunk(cx)) {
            // A reset of a datagram session is its end.
            Err(_) => Poll::Ready(Ok(None)),
            other => Poll::Ready(other),
        }
    }

    fn buffered(&self) -> usize {
        0
    }
}

/// A UDP sub-connection's sending half: each datagram one Keep frame naming its source.
pub struct SubDatagramSend(SubSend);

impl DatagramSend for SubDatagramSend {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.0.reserving.is_none() {
            let data = &self.0.shared.data;
            self.0.reserving = Some(Box::pin(data.clone().reserve_owned()));
        }
        // Only waits for room; the permit is taken again in `start_send`.
        let reserving = self.0.reserving.as_mut().expect("set above");
        match ready!(reserving.as_mut().poll(cx)) {
            Ok(permit) => {
                drop(permit);
                self.0.reserving = None;
                Poll::Ready(Ok(()))
            }
            Err(_) => {
                self.0.reserving = None;
                Poll::Ready(Err(closed()))
            }
        }
    }

    fn start_send(&mut self, payload: &[u8]) -> io::Result<()> {
        if payload.len() > frame::MAX_DATA {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "datagram too long for a Mux frame",
            ));
        }
        let mut out = Vec::with_capacity(payload.len() + 32);
        match &self.0.udp_source {
            Some(source) => encode_udp_keep(&mut out, self.0.id, source, payload),
            None => encode_keep(&mut out, self.0.id, payload),
        }
        // Room was there a moment ago; if another sub-connection took it, wait as a send.
        match self.0.shared.data.try_send(Bytes::from(out)) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(frame)) => {
                // Rare: another sub-connection took the room. Datagrams need no order: the
                // control queue takes it, or it is dropped as a full socket buffer would.
                let _ = self.0.shared.control.try_send(frame);
                Ok(())
            }
            Err(mpsc::error::TrySendError::Closed(_)) => Err(closed()),
        }
    }

    fn poll_flush(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.0.poll_end(cx)
    }
}

/// The client end of a Mux.Cool connection: opens sub-connections on it.
pub struct MuxClient {
    shared: Arc<Shared>,
}

impl MuxClient {
    /// Starts the client end on `stream` (the proxy's stream to `v1.mux.cool`); the returned
    /// future runs the connection and must be spawned.
    pub fn start(
        stream: BoxStream,
        limits: Limits,
    ) -> (
        Arc<MuxClient>,
        impl Future<Output = io::Result<()>> + Send + 'static,
    ) {
        let (shared, reader, writer) = start(stream, limits);
        let client = Arc::new(MuxClient {
            shared: shared.clone(),
        });
        let run = async move {
            let result = tokio::select! {
                r = read_frames(&shared, reader, Role::Client) => r,
                r = writer => r,
            };
            shared.close_all();
            result
        };
        (client, run)
    }

    /// Sub-connections open now.
    pub fn open_now(&self) -> usize {
        self.shared.table().entries.len()
    }

    /// True once no more sub-connections may be opened: the connection ended, or
    /// `concurrency` are open now, or it has opened `lifetime` over its life (Xray: 128).
    pub fn is_full(&self, concurrency: usize, lifetime: usize) -> bool {
        let table = self.shared.table();
        table.closed || table.entries.len() >= concurrency || table.opened >= lifetime
    }

    pub fn is_closed(&self) -> bool {
        self.shared.table().closed
    }

    fn open(&self, network: u8, destination: &Address) -> io::Result<(SubRecv, SubSend, Bytes)> {
        let mut table = self.shared.table();
        if table.closed {
            return Err(closed());
        }
        let mut id = table.last_id;
        // Ids count up from 1 as Xray's do, skipping any still open after a wrap.
        for _ in 0..=u16::MAX as usize {
            id = id.wrapping_add(1);
            if id != 0 && !table.entries.contains_key(&id) {
                break;
            }
        }
        if table.entries.contains_key(&id) || id == 0 {
            return Err(io::Error::other("Mux: no free session id"));
        }
        table.last_id = id;
        table.opened += 1;
        let udp = (network == NETWORK_UDP).then(|| destination.clone());
        let (recv, mut send) = self.shared.register(&mut table, id, udp);
        // Our datagrams name their destination in every Keep frame, as Xray's client does.
        send.udp_source = (network == NETWORK_UDP).then(|| destination.clone());
        let mut new = Vec::with_capacity(32);
        let global_id = (network == NETWORK_UDP).then_some([0u8; 8]);
        encode_new(&mut new, id, network, destination, global_id);
        Ok((recv, send, Bytes::from(new)))
    }

    /// Opens a TCP sub-connection to `destination`.
    pub async fn open_stream(&self, destination: &Address) -> io::Result<SubStream> {
        let (recv, send, new) = self.open(NETWORK_TCP, destination)?;
        self.shared.data.send(new).await.map_err(|_| closed())?;
        Ok(SubStream { recv, send })
    }

    /// Opens a UDP sub-connection to `destination`.
    pub async fn open_datagrams(
        &self,
        destination: &Address,
    ) -> io::Result<(SubDatagramRecv, SubDatagramSend)> {
        let (recv, send, new) = self.open(NETWORK_UDP, destination)?;
        self.shared.data.send(new).await.map_err(|_| closed())?;
        Ok((SubDatagramRecv(recv), SubDatagramSend(send)))
    }
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
