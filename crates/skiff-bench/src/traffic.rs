//! The bench's own traffic source (A) and sink (D), so no iperf is needed. Plain blocking
//! sockets and one thread per connection and direction: the simplest code that moves tens of
//! Gbit/s on loopback without becoming the bottleneck (its own CPU is measured and reported).
//!
//! Every connection starts with a 16-byte header from the source: `SKB1`, a mode byte, three
//! zero bytes and a big-endian byte count (u64::MAX: "until the source stops").
//!
//! `Exchange` (`--rate`) is a request and its answer: the count is the request's size, the
//! source sends that many bytes after the header, the sink answers with as many, and the
//! source closes.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustls::{ClientConfig, ClientConnection, ServerConfig, ServerConnection, StreamOwned};

use crate::tls::TlsPayload;

const MAGIC: &[u8; 4] = b"SKB1";
const CHUNK: usize = 256 * 1024;
/// No single bench connection may hang a run: reads and writes give up after this.
const IO_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs a closure in the calling thread before any socket is made: how the bench puts a
/// thread into a network namespace for the lossy-link rows.
pub type Enter = Arc<dyn Fn() -> io::Result<()> + Send + Sync>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Upload = 1,
    Download = 2,
    Both = 3,
    /// Open and stay idle (memory per idle connection).
    Hold = 4,
    /// One byte there, one byte back (latency).
    Ping = 5,
    /// A request of the header's count of bytes, answered with as many (connection rate).
    Exchange = 6,
}

impl Mode {
    fn from_byte(b: u8) -> Option<Mode> {
        Some(match b {
            1 => Mode::Upload,
            2 => Mode::Download,
            3 => Mode::Both,
            4 => Mode::Hold,
            5 => Mode::Ping,
            6 => Mode::Exchange,
            _ => return None,
        })
    }

    pub fn parse(text: &str) -> Option<Mode> {
        match text {
            "upload" | "up" => Some(Mode::Upload),
            "download" | "down" => Some(Mode::Download),
            "both" | "bidir" => Some(Mode::Both),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::Upload => "upload",
            Mode::Download => "download",
            Mode::Both => "both",
            Mode::Hold => "hold",
            Mode::Ping => "ping",
            Mode::Exchange => "exchange",
        }
    }
}

fn header(mode: Mode, bytes: u64) -> [u8; 16] {
    let mut h = [0u8; 16];
    h[..4].copy_from_slice(MAGIC);
    h[4] = mode as u8;
    h[8..].copy_from_slice(&bytes.to_be_bytes());
    h
}

fn parse_header(h: &[u8; 16]) -> Option<(Mode, u64)> {
    if &h[..4] != MAGIC {
        return None;
    }
    let mode = Mode::from_byte(h[4])?;
    let mut n = [0u8; 8];
    n.copy_from_slice(&h[8..]);
    Some((mode, u64::from_be_bytes(n)))
}

/// Bytes that are not all zeros (some paths compress or special-case zero pages).
fn pattern(len: usize) -> Vec<u8> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// Writes `bytes` (or until `until` passes) from a fixed pattern; returns bytes written.
fn pump_out<W: Write>(stream: &mut W, bytes: u64, until: Option<Instant>) -> io::Result<u64> {
    let data = pattern(CHUNK);
    let mut sent = 0u64;
    while sent < bytes {
        if until.is_some_and(|t| Instant::now() >= t) {
            break;
        }
        let n = (bytes - sent).min(CHUNK as u64) as usize;
        match stream.write(&data[..n]) {
            Ok(0) => break,
            Ok(w) => sent += w as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(sent)
}

/// The source's side of a download: `bytes` exactly, or whatever arrives until `until`.
fn download<R: Read>(stream: &mut R, bytes: u64, until: Option<Instant>) -> io::Result<u64> {
    let Some(t) = until else {
        return pump_in(stream, bytes);
    };
    let mut buf = vec![0u8; CHUNK];
    let mut got = 0u64;
    while Instant::now() < t {
        match stream.read(&mut buf)? {
            0 => break,
            n => got += n as u64,
        }
    }
    Ok(got)
}

/// Reads until `bytes` arrived or EOF; returns bytes read.
fn pump_in<R: Read>(stream: &mut R, bytes: u64) -> io::Result<u64> {
    let mut buf = vec![0u8; CHUNK];
    let mut got = 0u64;
    while got < bytes {
        let want = (bytes - got).min(CHUNK as u64) as usize;
        match stream.read(&mut buf[..want]) {
            Ok(0) => break,
            Ok(n) => got += n as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// The sink D: accepts connections and serves whatever mode each header asks for.
pub struct Sink {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Sink {
    /// Listens on `bind` (port 0: any) from a thread that first runs `enter`. With `tls`, a
    /// connection that opens with a TLS record is served inside TLS.
    pub fn start(
        bind: SocketAddr,
        enter: Option<Enter>,
        tls: Option<Arc<ServerConfig>>,
    ) -> io::Result<Sink> {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let stop_flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let listener = match enter
                .as_ref()
                .map_or(Ok(()), |f| f())
                .and_then(|()| TcpListener::bind(bind))
            {
                Ok(l) => l,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            let _ = tx.send(listener.local_addr());
            // Poll with a short timeout instead of a blocking accept: the sink may live in
            // another network namespace, where nobody outside could connect to wake it.
            while !stop_flag.load(Ordering::Relaxed) {
                if !readable(&listener, 100) {
                    continue;
                }
                if let Ok((stream, _)) = listener.accept() {
                    let tls = tls.clone();
                    std::thread::spawn(move || {
                        let _ = serve(stream, tls);
                    });
                }
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(10))
            .map_err(|_| io::Error::other("sink did not start"))??;
        Ok(Sink {
            addr,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Waits up to `ms` for a pending connection on `listener`.
fn readable(listener: &TcpListener, ms: i32) -> bool {
    use std::os::fd::AsRawFd;
    let mut fd = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call.
    let n = unsafe { libc::poll(&mut fd, 1, ms) };
    n > 0 && fd.revents & libc::POLLIN != 0
}

fn serve(mut stream: TcpStream, tls: Option<Arc<ServerConfig>>) -> io::Result<()> {
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut first = [0u8; 1];
    // 0x16 opens a TLS handshake record; our plain header starts with 'S'.
    if stream.peek(&mut first)? == 1 && first[0] == 0x16 {
        let config = tls.ok_or_else(|| io::Error::other("a TLS payload, but no certificate"))?;
        let conn = ServerConnection::new(config).map_err(io::Error::other)?;
        return serve_tls(&mut StreamOwned::new(conn, stream));
    }
    let mut h = [0u8; 16];
    stream.read_exact(&mut h)?;
    let (mode, bytes) = parse_header(&h).ok_or_else(|| io::Error::other("bad bench header"))?;
    match mode {
        Mode::Upload => {
            let got = pump_in(&mut stream, bytes)?;
            stream.write_all(&got.to_be_bytes())?;
        }
        Mode::Download => {
            pump_out(&mut stream, bytes, None)?;
            stream.shutdown(Shutdown::Write)?;
        }
        Mode::Both => {
            let mut writer = stream.try_clone()?;
            let out = std::thread::spawn(move || pump_out(&mut writer, bytes, None));
            pump_in(&mut stream, bytes)?;
            let _ = out.join();
            // The FIN only once both directions are done (see `fin_after_both`).
            let _ = stream.shutdown(Shutdown::Write);
        }
        Mode::Hold => {
            stream.set_read_timeout(None)?;
            let mut b = [0u8; 1];
            while stream.read(&mut b)? > 0 {}
        }
        Mode::Ping => {
            let mut b = [0u8; 1];
            while stream.read(&mut b)? > 0 {
                stream.write_all(&b)?;
            }
        }
        Mode::Exchange => answer(&mut stream, bytes)?,
    }
    Ok(())
}

/// The largest request (and answer) an `Exchange` may ask for: a bad header must not make
/// the sink read or write without end.
const MAX_EXCHANGE: u64 = 1 << 20;

/// The sink's side of an `Exchange`: reads the request, answers with as many bytes, then
/// waits (one read, bounded by the stream's timeout) for the source to close first, so the
/// connection ends the way a short client connection does.
fn answer<S: Read + Write>(s: &mut S, bytes: u64) -> io::Result<()> {
    if bytes > MAX_EXCHANGE {
        return Err(io::Error::other("exchange larger than 1 MiB"));
    }
    let mut request = vec![0u8; bytes as usize];
    s.read_exact(&mut request)?;
    s.write_all(&pattern(bytes as usize))?;
    s.flush()?;
    let mut b = [0u8; 1];
    // EOF, a reset, or a TLS close without close_notify: all mean the source is done.
    let _ = s.read(&mut b);
    Ok(())
}

/// The sink's side of a connection whose payload is inside TLS.
fn serve_tls(s: &mut StreamOwned<ServerConnection, TcpStream>) -> io::Result<()> {
    let mut h = [0u8; 16];
    s.read_exact(&mut h)?;
    let (mode, bytes) = parse_header(&h).ok_or_else(|| io::Error::other("bad bench header"))?;
    match mode {
        Mode::Upload => {
            let got = pump_in(s, bytes)?;
            s.write_all(&got.to_be_bytes())?;
            s.flush()?;
        }
        Mode::Download => {
            pump_out(s, bytes, None)?;
            s.conn.send_close_notify();
            s.flush()?;
        }
        Mode::Ping => {
            let mut b = [0u8; 1];
            while s.read(&mut b)? > 0 {
                s.write_all(&b)?;
                s.flush()?;
            }
        }
        Mode::Hold => {
            let mut b = [0u8; 1];
            while s.read(&mut b)? > 0 {}
        }
        Mode::Exchange => answer(s, bytes)?,
        Mode::Both => {
            return Err(io::Error::other(
                "both directions at once need a raw payload",
            ));
        }
    }
    Ok(())
}

/// What one transfer moved.
#[derive(Clone, Copy, Debug)]
pub struct Transfer {
    /// Payload bytes through the chain (both directions added for `Both`).
    pub bytes: u64,
    pub seconds: f64,
}

impl Transfer {
    pub fn mbps(&self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes as f64 * 8.0 / self.seconds / 1e6
        } else {
            0.0
        }
    }
}

/// How much each connection moves.
#[derive(Clone, Copy, Debug)]
pub enum Amount {
    Bytes(u64),
    Duration(Duration),
}

/// The source A: `parallel` connections to `entry`, each moving its share of `amount` in
/// `mode`, all started together. Runs `enter` in the coordinating thread first.
pub fn transfer(
    entry: SocketAddr,
    mode: Mode,
    amount: Amount,
    parallel: u32,
    enter: Option<Enter>,
    tls: Option<Arc<ClientConfig>>,
) -> io::Result<Transfer> {
    let parallel = parallel.max(1);
    let handle = std::thread::spawn(move || -> io::Result<Transfer> {
        if let Some(f) = &enter {
            f()?;
        }
        let start = Instant::now();
        let workers: Vec<_> = (0..parallel)
            .map(|_| {
                let (bytes, until) = match amount {
                    Amount::Bytes(total) => (total / u64::from(parallel), None),
                    Amount::Duration(d) => (u64::MAX, Some(start + d)),
                };
                let tls = tls.clone();
                std::thread::spawn(move || match tls {
                    None => one_connection(entry, mode, bytes, until),
                    Some(config) => one_tls_connection(entry, mode, bytes, until, config),
                })
            })
            .collect();
        let mut total = 0u64;
        for w in workers {
            total += w
                .join()
                .map_err(|_| io::Error::other("source thread panicked"))??;
        }
        Ok(Transfer {
            bytes: total,
            seconds: start.elapsed().as_secs_f64(),
        })
    });
    handle
        .join()
        .map_err(|_| io::Error::other("source panicked"))?
}

fn one_connection(
    entry: SocketAddr,
    mode: Mode,
    bytes: u64,
    until: Option<Instant>,
) -> io::Result<u64> {
    let mut s = TcpStream::connect_timeout(&entry, Duration::from_secs(10))?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    s.write_all(&header(mode, bytes))?;
    match mode {
        Mode::Upload => {
            pump_out(&mut s, bytes, until)?;
            // The sink stops reading at the announced count; only "until the source stops"
            // needs the FIN. Not sending it otherwise keeps peers that close both directions
            // at the client's FIN (trojan-gfw, which has no half-close) from dropping the ack.
            if bytes == u64::MAX {
                s.shutdown(Shutdown::Write)?;
            }
            // The sink's count: bytes that really crossed the chain, acknowledged at the end.
            let mut ack = [0u8; 8];
            s.read_exact(&mut ack)?;
            Ok(u64::from_be_bytes(ack))
        }
        Mode::Download => download(&mut s, bytes, until),
        Mode::Both => {
            let mut writer = s.try_clone()?;
            let fin_early = !fin_after_both(bytes);
            let out = std::thread::spawn(move || {
                let r = pump_out(&mut writer, bytes, until);
                if fin_early {
                    let _ = writer.shutdown(Shutdown::Write);
                }
                r
            });
            let got = pump_in(&mut s, bytes)?;
            let sent = out
                .join()
                .map_err(|_| io::Error::other("writer panicked"))??;
            let _ = s.shutdown(Shutdown::Write);
            Ok(got + sent)
        }
        Mode::Hold | Mode::Ping | Mode::Exchange => Err(io::Error::other("not a transfer mode")),
    }
}

/// Whether a `both` transfer of `bytes` each way sends its FIN only once it has also received
/// everything. With a known count it does: Xray's and sing-box's relays end the whole
/// connection when one direction ends, so a FIN sent as soon as one side had written its
/// share reset the other direction still under way ("connection reset by peer" on their
/// rows, never on Skiff's). A run bounded by time (`u64::MAX`) needs each FIN to say where
/// its direction ends.
fn fin_after_both(bytes: u64) -> bool {
    bytes != u64::MAX
}

/// One source connection with its payload inside TLS 1.3 (upload or download).
fn one_tls_connection(
    entry: SocketAddr,
    mode: Mode,
    bytes: u64,
    until: Option<Instant>,
    config: Arc<ClientConfig>,
) -> io::Result<u64> {
    let tcp = TcpStream::connect_timeout(&entry, Duration::from_secs(10))?;
    tcp.set_nodelay(true)?;
    tcp.set_read_timeout(Some(IO_TIMEOUT))?;
    tcp.set_write_timeout(Some(IO_TIMEOUT))?;
    let conn =
        ClientConnection::new(config, TlsPayload::server_name()).map_err(io::Error::other)?;
    let mut s = StreamOwned::new(conn, tcp);
    s.write_all(&header(mode, bytes))?;
    match mode {
        Mode::Upload => {
            pump_out(&mut s, bytes, until)?;
            if until.is_some() {
                // A timed upload ends with close_notify; the sink then acknowledges its count.
                s.conn.send_close_notify();
            }
            s.flush()?;
            let mut ack = [0u8; 8];
            s.read_exact(&mut ack)?;
            Ok(u64::from_be_bytes(ack))
        }
        Mode::Download => download(&mut s, bytes, until),
        _ => Err(io::Error::other(
            "--payload tls moves data one way at a time (upload or download)",
        )),
    }
}

/// Opens `n` idle connections through `entry` (memory per idle connection). Keep the
/// returned streams alive for as long as they should stay open.
pub fn hold(entry: SocketAddr, n: u32, enter: Option<Enter>) -> io::Result<Vec<TcpStream>> {
    let handle = std::thread::spawn(move || -> io::Result<Vec<TcpStream>> {
        if let Some(f) = &enter {
            f()?;
        }
        (0..n)
            .map(|_| {
                let mut s = TcpStream::connect_timeout(&entry, Duration::from_secs(10))?;
                s.write_all(&header(Mode::Hold, 0))?;
                Ok(s)
            })
            .collect()
    });
    handle
        .join()
        .map_err(|_| io::Error::other("hold panicked"))?
}

/// Connect + first byte back through the chain, `n` times in a row.
pub fn latency(entry: SocketAddr, n: u32, enter: Option<Enter>) -> io::Result<Vec<Duration>> {
    let handle = std::thread::spawn(move || -> io::Result<Vec<Duration>> {
        if let Some(f) = &enter {
            f()?;
        }
        (0..n)
            .map(|_| {
                let start = Instant::now();
                let mut s = TcpStream::connect_timeout(&entry, Duration::from_secs(10))?;
                s.set_nodelay(true)?;
                s.set_read_timeout(Some(Duration::from_secs(10)))?;
                let mut msg = header(Mode::Ping, 0).to_vec();
                msg.push(b'?');
                s.write_all(&msg)?;
                let mut b = [0u8; 1];
                s.read_exact(&mut b)?;
                Ok(start.elapsed())
            })
            .collect()
    });
    handle
        .join()
        .map_err(|_| io::Error::other("latency panicked"))?
}

/// Bytes each way of one `--rate` connection.
pub const EXCHANGE_BYTES: u64 = 1024;

/// Client threads `--rate` runs at once. Each spends most of its time waiting on the chain
/// (connect, then the answer), so 16 in flight keep B and C busy on a machine of a few cores
/// while the source itself stays a small share of the CPU (reported beside the figures).
pub const RATE_CLIENTS: u32 = 16;

/// `--rate` starts no connection after this, whatever N was: a slow chain (an emulated
/// link, a CPU cap) still ends its row in bounded time, with the connections it completed.
pub const RATE_TIME_LIMIT: Duration = Duration::from_secs(60);

/// Time allowed for each step (connect, write, read) of one `--rate` connection.
const RATE_IO_TIMEOUT: Duration = Duration::from_secs(10);

/// What a `--rate` run did.
#[derive(Debug, Default)]
pub struct RateRun {
    /// Connect to first byte of the answer, one per completed connection.
    pub ttfb: Vec<Duration>,
    pub failed: u32,
    /// The first failure, to say why when nothing completed.
    pub first_error: Option<String>,
    pub seconds: f64,
    pub clients: u32,
}

/// `n` short connections through `entry` (each: connect, an [`EXCHANGE_BYTES`] request, as
/// many back, close), `clients` at a time, starting none after `limit`. Runs `enter` in the
/// coordinating thread first; the client threads inherit its network namespace.
pub fn rate(
    entry: SocketAddr,
    n: u32,
    clients: u32,
    limit: Duration,
    enter: Option<Enter>,
) -> io::Result<RateRun> {
    use std::sync::atomic::AtomicU64;
    let clients = clients.clamp(1, n.max(1));
    let handle = std::thread::spawn(move || -> io::Result<RateRun> {
        if let Some(f) = &enter {
            f()?;
        }
        // u64: the count may pass `n` by one per client without wrapping.
        let next = Arc::new(AtomicU64::new(0));
        let start = Instant::now();
        let deadline = start + limit;
        let workers: Vec<_> = (0..clients)
            .map(|_| {
                let next = next.clone();
                std::thread::spawn(move || {
                    let request = [
                        &header(Mode::Exchange, EXCHANGE_BYTES)[..],
                        &pattern(EXCHANGE_BYTES as usize),
                    ]
                    .concat();
                    let mut run = RateRun::default();
                    while Instant::now() < deadline
                        && next.fetch_add(1, Ordering::Relaxed) < u64::from(n)
                    {
                        match exchange(entry, &request) {
                            Ok(t) => run.ttfb.push(t),
                            Err(e) => {
                                run.failed += 1;
                                run.first_error.get_or_insert_with(|| e.to_string());
                            }
                        }
                    }
                    run
                })
            })
            .collect();
        let mut total = RateRun {
            clients,
            ..RateRun::default()
        };
        for w in workers {
            let run = w
                .join()
                .map_err(|_| io::Error::other("rate client panicked"))?;
            total.ttfb.extend(run.ttfb);
            total.failed += run.failed;
            if total.first_error.is_none() {
                total.first_error = run.first_error;
            }
        }
        total.seconds = start.elapsed().as_secs_f64();
        Ok(total)
    });
    handle
        .join()
        .map_err(|_| io::Error::other("rate source panicked"))?
}

/// One `--rate` connection; returns the time from connect to the answer's first byte.
fn exchange(entry: SocketAddr, request: &[u8]) -> io::Result<Duration> {
    let start = Instant::now();
    let mut s = TcpStream::connect_timeout(&entry, RATE_IO_TIMEOUT)?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(RATE_IO_TIMEOUT))?;
    s.set_write_timeout(Some(RATE_IO_TIMEOUT))?;
    s.write_all(request)?;
    let mut answer = [0u8; EXCHANGE_BYTES as usize];
    let first = loop {
        match s.read(&mut answer) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => break n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    };
    let ttfb = start.elapsed();
    s.read_exact(&mut answer[first..])?;
    Ok(ttfb)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sink() -> Sink {
        Sink::start("127.0.0.1:0".parse().unwrap(), None, None).unwrap()
    }

    #[test]
    fn header_round_trip() {
        assert_eq!(
            parse_header(&header(Mode::Both, 42)),
            Some((Mode::Both, 42))
        );
        assert_eq!(parse_header(&[0u8; 16]), None);
    }

    #[test]
    fn every_mode_moves_exactly_what_was_asked() {
        let s = sink();
        for mode in [Mode::Upload, Mode::Download] {
            let t = transfer(s.addr, mode, Amount::Bytes(8 << 20), 2, None, None).unwrap();
            assert_eq!(t.bytes, 8 << 20, "{mode:?}");
            assert!(t.mbps() > 0.0);
        }
        let t = transfer(s.addr, Mode::Both, Amount::Bytes(4 << 20), 1, None, None).unwrap();
        assert_eq!(t.bytes, 8 << 20);
        let t = transfer(
            s.addr,
            Mode::Upload,
            Amount::Duration(Duration::from_millis(200)),
            1,
            None,
            None,
        )
        .unwrap();
        assert!(t.bytes > 0 && t.seconds >= 0.2);
        assert_eq!(latency(s.addr, 5, None).unwrap().len(), 5);
        assert_eq!(hold(s.addr, 3, None).unwrap().len(), 3);
    }

    /// A relay as Xray's and sing-box's are in this respect: when either side ends its
    /// direction it closes the whole connection. Its way back (sink to source) is slowed, so
    /// the source has written all of its share well before it has read the sink's.
    fn closing_relay(to: SocketAddr) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let Ok((a, _)) = listener.accept() else {
                return;
            };
            let d = TcpStream::connect(to).unwrap();
            let (mut a_in, mut d_out) = (a.try_clone().unwrap(), d.try_clone().unwrap());
            let (a2, d2) = (a.try_clone().unwrap(), d.try_clone().unwrap());
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut a_in, &mut d_out);
                let _ = a2.shutdown(Shutdown::Both);
                let _ = d2.shutdown(Shutdown::Both);
            });
            let (mut d_in, mut a_out) = (d, a);
            let mut buf = vec![0u8; 64 << 10];
            // Bounded: at most the transfer's 4 MiB in 64 KiB steps, 2 ms apart.
            for _ in 0..256 {
                match d_in.read(&mut buf) {
                    Ok(n) if n > 0 && a_out.write_all(&buf[..n]).is_ok() => {
                        std::thread::sleep(Duration::from_millis(2))
                    }
                    _ => break,
                }
            }
            let _ = a_out.shutdown(Shutdown::Both);
            let _ = d_in.shutdown(Shutdown::Both);
        });
        addr
    }

    /// `both` through a relay that closes everything at the first FIN: each side holds its
    /// FIN until it has the other's share, so nothing is cut (it was: the source's early FIN
    /// reset the download still under way).
    #[test]
    fn both_ways_survive_a_relay_that_closes_at_the_first_fin() {
        let s = sink();
        let relay = closing_relay(s.addr);
        let t = transfer(relay, Mode::Both, Amount::Bytes(4 << 20), 1, None, None).unwrap();
        assert_eq!(t.bytes, 8 << 20);
    }

    #[test]
    fn sink_answers_a_kib_for_a_kib() {
        let s = sink();
        let mut c = TcpStream::connect(s.addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c.write_all(&header(Mode::Exchange, EXCHANGE_BYTES))
            .unwrap();
        c.write_all(&[7u8; EXCHANGE_BYTES as usize]).unwrap();
        let mut answer = vec![0u8; EXCHANGE_BYTES as usize];
        c.read_exact(&mut answer).unwrap();
        assert_eq!(answer, pattern(EXCHANGE_BYTES as usize));
        // Nothing more: once the source closes its side, the sink closes too.
        c.shutdown(Shutdown::Write).unwrap();
        let mut rest = Vec::new();
        c.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty(), "{} extra bytes", rest.len());

        // A request cut short gets no answer; an oversized one is refused.
        for (announced, sent) in [(EXCHANGE_BYTES, 100), (MAX_EXCHANGE + 1, 0)] {
            let mut c = TcpStream::connect(s.addr).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            c.write_all(&header(Mode::Exchange, announced)).unwrap();
            c.write_all(&vec![1u8; sent]).unwrap();
            c.shutdown(Shutdown::Write).unwrap();
            let mut rest = Vec::new();
            let _ = c.read_to_end(&mut rest);
            assert!(rest.is_empty(), "{announced}: {} bytes", rest.len());
        }
    }

    #[test]
    fn sink_answers_an_exchange_inside_tls() {
        let tls = TlsPayload::new().unwrap();
        let s = Sink::start(
            "127.0.0.1:0".parse().unwrap(),
            None,
            Some(tls.server.clone()),
        )
        .unwrap();
        let tcp = TcpStream::connect(s.addr).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let conn = ClientConnection::new(tls.client, TlsPayload::server_name()).unwrap();
        let mut c = StreamOwned::new(conn, tcp);
        c.write_all(&header(Mode::Exchange, EXCHANGE_BYTES))
            .unwrap();
        c.write_all(&[7u8; EXCHANGE_BYTES as usize]).unwrap();
        c.flush().unwrap();
        let mut answer = vec![0u8; EXCHANGE_BYTES as usize];
        c.read_exact(&mut answer).unwrap();
        assert_eq!(answer, pattern(EXCHANGE_BYTES as usize));
    }

    #[test]
    fn rate_runs_n_connections_and_no_more() {
        let s = sink();
        let r = rate(s.addr, 50, 4, Duration::from_secs(30), None).unwrap();
        assert_eq!((r.ttfb.len(), r.failed, r.clients), (50, 0, 4));
        assert!(r.seconds > 0.0);
        // More clients than connections: only as many as there are connections.
        let r = rate(s.addr, 3, 16, Duration::from_secs(30), None).unwrap();
        assert_eq!((r.ttfb.len(), r.clients), (3, 3));
        // Nobody listening: every connection fails, and says why.
        let closed = crate::process::free_port().unwrap();
        let r = rate(
            SocketAddr::from(([127, 0, 0, 1], closed)),
            5,
            2,
            Duration::from_secs(30),
            None,
        )
        .unwrap();
        assert_eq!((r.ttfb.len(), r.failed), (0, 5));
        assert!(r.first_error.is_some());
        // The time limit stops it starting connections.
        let r = rate(s.addr, 1_000_000, 2, Duration::ZERO, None).unwrap();
        assert_eq!(r.ttfb.len() as u32 + r.failed, 0);
    }

    #[test]
    fn tls_payload_moves_exactly_what_was_asked() {
        let tls = TlsPayload::new().unwrap();
        let s = Sink::start(
            "127.0.0.1:0".parse().unwrap(),
            None,
            Some(tls.server.clone()),
        )
        .unwrap();
        for mode in [Mode::Upload, Mode::Download] {
            let t = transfer(
                s.addr,
                mode,
                Amount::Bytes(4 << 20),
                2,
                None,
                Some(tls.client.clone()),
            )
            .unwrap();
            assert_eq!(t.bytes, 4 << 20, "{mode:?}");
        }
        let t = transfer(
            s.addr,
            Mode::Upload,
            Amount::Duration(Duration::from_millis(200)),
            1,
            None,
            Some(tls.client.clone()),
        )
        .unwrap();
        assert!(t.bytes > 0);
        let both = transfer(
            s.addr,
            Mode::Both,
            Amount::Bytes(1 << 20),
            1,
            None,
            Some(tls.client),
        );
        assert!(both.is_err());
    }
}
