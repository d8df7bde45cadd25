//! The server's sessions of packet-up and stream-up: one per session id, holding the uploads
//! until the download (`GET /path/SESSION`) reads them. A session whose download never comes
//! is dropped after [`UNCONNECTED_TTL`], as Xray reaps it (hub.go `upsertSession`).

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::Notify;

use super::reorder::{Admission, PushError, Reorder};
use super::tunnel::BoxRead;

/// Bytes all sessions of an inbound may hold for packets that wait for an earlier one. Past
/// it, only the packet a session's reader expects next is taken; the others wait (and time
/// out), so a client flooding out-of-order posts across many sessions cannot grow memory
/// beyond this plus one post per session.
pub const REORDER_BUDGET: usize = 256 << 20;

/// How long a session waits for its download request.
pub const UNCONNECTED_TTL: Duration = Duration::from_secs(30);

/// The sessions of one inbound.
pub struct Sessions {
    map: Mutex<HashMap<String, Arc<Session>>>,
    /// Bytes buffered in every session's reassembly, against [`REORDER_BUDGET`].
    buffered: Arc<AtomicUsize>,
    window: usize,
    max_sessions: usize,
}

#[derive(Debug, PartialEq, Eq)]
pub enum SessionError {
    /// The table is full.
    TooMany,
}

impl Sessions {
    /// `window`: `scMaxBufferedPosts`; `max_sessions`: the table's cap.
    pub fn new(window: usize, max_sessions: usize) -> Arc<Self> {
        Arc::new(Sessions {
            map: Mutex::new(HashMap::new()),
            buffered: Arc::new(AtomicUsize::new(0)),
            window,
            max_sessions,
        })
    }

    /// The session `id`, created (with its reaper) if new.
    pub fn upsert(self: &Arc<Self>, id: &str) -> Result<Arc<Session>, SessionError> {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = map.get(id) {
            return Ok(s.clone());
        }
        if map.len() >= self.max_sessions {
            return Err(SessionError::TooMany);
        }
        let session = Arc::new(Session {
            state: Mutex::new(State {
                reorder: Reorder::new(self.window),
                stream_up: None,
                connected: false,
                closed: false,
                waiting: 0,
                max_waiting: self.window.max(1),
                held: 0,
                reader: None,
            }),
            window_moved: Notify::new(),
            budget: self.buffered.clone(),
        });
        map.insert(id.to_owned(), session.clone());
        drop(map);
        let (table, id, s) = (Arc::downgrade(self), id.to_owned(), session.clone());
        tokio::spawn(async move {
            tokio::time::sleep(UNCONNECTED_TTL).await;
            if !s.lock().connected
                && let Some(table) = table.upgrade()
            {
                tracing::debug!(session = %id, "xhttp session expired: its download never came");
                table.remove(&id, &s);
            }
        });
        Ok(session)
    }

    /// Removes `session` (if `id` still names it) and closes it.
    pub fn remove(&self, id: &str, session: &Arc<Session>) {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if map.get(id).is_some_and(|s| Arc::ptr_eq(s, session)) {
            map.remove(id);
        }
        drop(map);
        session.close();
    }

    pub fn len(&self) -> usize {
        self.map.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

pub struct Session {
    state: Mutex<State>,
    /// Wakes uploads waiting for the window to move (and for the session's end).
    window_moved: Notify,
    /// The inbound's count of buffered bytes.
    budget: Arc<AtomicUsize>,
}

struct State {
    reorder: Reorder,
    /// stream-up's request body, taken by the download's reader.
    stream_up: Option<BoxRead>,
    connected: bool,
    closed: bool,
    /// Uploads waiting for the window, and how many may (the window's size: each holds a
    /// request open, not its body, which stays unread until admitted).
    waiting: usize,
    max_waiting: usize,
    /// Bytes this session holds in `reorder` (given back to the budget when it goes).
    held: usize,
    reader: Option<Waker>,
}

/// Why an upload packet was not taken.
#[derive(Debug, PartialEq, Eq)]
pub enum UploadError {
    Push(PushError),
    /// More uploads wait than the window holds.
    TooManyWaiting,
    /// The reader did not make room in time.
    WindowTimeout,
    Closed,
    /// A second stream-up upload, or a packet after one.
    Conflict,
}

impl std::fmt::Display for UploadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UploadError::Push(e) => e.fmt(f),
            UploadError::TooManyWaiting => write!(f, "too many uploads wait for the window"),
            UploadError::WindowTimeout => write!(f, "the window did not move in time"),
            UploadError::Closed => write!(f, "session closed"),
            UploadError::Conflict => write!(f, "the session already has a streaming upload"),
        }
    }
}

impl Session {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits (at most `limit`) until packet `seq` fits the window; then its body may be read.
    pub async fn wait_admission(&self, seq: u64, limit: Duration) -> Result<(), UploadError> {
        let deadline = tokio::time::Instant::now() + limit;
        let mut counted = false;
        let result = loop {
            let notified = self.window_moved.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut st = self.lock();
                if st.closed {
                    break Err(UploadError::Closed);
                }
                if st.stream_up.is_some() {
                    break Err(UploadError::Conflict);
                }
                let over_budget = seq != st.reorder.next()
                    && self.budget.load(Ordering::Relaxed) >= REORDER_BUDGET;
                match st.reorder.admit(seq) {
                    Admission::Accept if !over_budget => break Ok(()),
                    Admission::Accept if !counted => {
                        if st.waiting >= st.max_waiting {
                            break Err(UploadError::TooManyWaiting);
                        }
                        st.waiting += 1;
                        counted = true;
                    }
                    Admission::Accept => {}
                    Admission::Refuse(e) => break Err(UploadError::Push(e)),
                    Admission::Wait if !counted => {
                        if st.waiting >= st.max_waiting {
                            break Err(UploadError::TooManyWaiting);
                        }
                        st.waiting += 1;
                        counted = true;
                    }
                    Admission::Wait => {}
                }
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                break Err(UploadError::WindowTimeout);
            }
        };
        if counted {
            self.lock().waiting -= 1;
        }
        result
    }

    /// Stores packet `seq` for the reader.
    pub fn push(&self, seq: u64, data: Bytes) -> Result<(), UploadError> {
        let mut st = self.lock();
        if st.closed {
            return Err(UploadError::Closed);
        }
        let len = data.len();
        st.reorder.push(seq, data).map_err(UploadError::Push)?;
        st.held += len;
        self.budget.fetch_add(len, Ordering::Relaxed);
        if let Some(w) = st.reader.take() {
            w.wake();
        }
        Ok(())
    }

    /// Makes `body` the session's upload (stream-up).
    pub fn set_stream_up(&self, body: BoxRead) -> Result<(), UploadError> {
        let mut st = self.lock();
        if st.closed {
            return Err(UploadError::Closed);
        }
        if st.stream_up.is_some() || st.reorder.next() > 0 || st.reorder.buffered() > 0 {
            return Err(UploadError::Conflict);
        }
        st.stream_up = Some(body);
        if let Some(w) = st.reader.take() {
            w.wake();
        }
        Ok(())
    }

    /// The download has come: the session no longer expires.
    pub fn mark_connected(&self) -> bool {
        let mut st = self.lock();
        let first = !st.connected;
        st.connected = true;
        first
    }

    pub fn close(&self) {
        let mut st = self.lock();
        st.closed = true;
        // What it held is dropped: its reader (if any) sees the end.
        self.budget
            .fetch_sub(std::mem::take(&mut st.held), Ordering::Relaxed);
        st.reorder = Reorder::new(1);
        st.stream_up = None;
        if let Some(w) = st.reader.take() {
            w.wake();
        }
        drop(st);
        self.window_moved.notify_waiters();
    }
}

/// The download's reading side: the session's packets in order, or its stream-up body.
pub struct SessionReader {
    session: Arc<Session>,
    pending: Bytes,
    body: Option<BoxRead>,
}

impl SessionReader {
    pub fn new(session: Arc<Session>) -> Self {
        SessionReader {
            session,
            pending: Bytes::new(),
            body: None,
        }
    }
}

impl AsyncRead for SessionReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(body) = this.body.as_mut() {
            return body.as_mut().poll_read(cx, out);
        }
        while this.pending.is_empty() {
            let mut st = this.session.lock();
            if let Some(body) = st.stream_up.take() {
                drop(st);
                this.body = Some(body);
                return this
                    .body
                    .as_mut()
                    .map_or(Poll::Ready(Ok(())), |b| b.as_mut().poll_read(cx, out));
            }
            match st.reorder.pop() {
                Some(data) => {
                    st.held = st.held.saturating_sub(data.len());
                    this.session.budget.fetch_sub(data.len(), Ordering::Relaxed);
                    drop(st);
                    this.session.window_moved.notify_waiters();
                    this.pending = data;
                }
                None if st.closed => return Poll::Ready(Ok(())),
                None => {
                    st.reader = Some(cx.waker().clone());
                    return Poll::Pending;
                }
            }
        }
        let n = this.pending.len().min(out.remaining());
        out.put_slice(&this.pending.split_to(n));
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn packets_read_in_order_and_the_budget_comes_back() {
        let sessions = Sessions::new(4, 8);
        let s = sessions.upsert("a").unwrap();
        for seq in [2u64, 0, 1] {
            s.wait_admission(seq, Duration::from_secs(1)).await.unwrap();
            s.push(seq, Bytes::from(vec![b'a' + seq as u8; 3])).unwrap();
        }
        assert_eq!(s.budget.load(Ordering::Relaxed), 9);
        let mut reader = SessionReader::new(s.clone());
        let mut got = [0u8; 9];
        reader.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"aaabbbccc");
        assert_eq!(s.budget.load(Ordering::Relaxed), 0);
        assert_eq!(
            s.wait_admission(1, Duration::from_secs(1)).await,
            Err(UploadError::Push(PushError::Duplicate(1)))
        );
        s.push(5, Bytes::from_static(b"zz")).unwrap();
        sessions.remove("a", &s);
        assert_eq!(s.budget.load(Ordering::Relaxed), 0);
        let mut rest = Vec::new();
        reader.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty(), "a closed session reads as ended");
        assert!(sessions.is_empty());
    }

    #[tokio::test]
    async fn waiting_uploads_are_bounded_and_time_out() {
        let sessions = Sessions::new(2, 8);
        let s = sessions.upsert("b").unwrap();
        // 2 and 3 are past the window of 2 (0, 1): they wait; a third waiter is refused.
        let (s2, s3) = (s.clone(), s.clone());
        let w2 =
            tokio::spawn(async move { s2.wait_admission(2, Duration::from_millis(300)).await });
        let w3 =
            tokio::spawn(async move { s3.wait_admission(3, Duration::from_millis(300)).await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            s.wait_admission(4, Duration::from_millis(300)).await,
            Err(UploadError::TooManyWaiting)
        );
        assert_eq!(w2.await.unwrap(), Err(UploadError::WindowTimeout));
        assert_eq!(w3.await.unwrap(), Err(UploadError::WindowTimeout));
        assert_eq!(sessions.upsert("c").map(|_| ()), Ok(()));
    }
}
