//! The server's sessions of packet-up and stream-up: one per session id, holding the uploads
//! until the download (`GET /path/SESSION`) reads them. A session whose download never comes
//! is dropped after [`UNCONNECTED_TTL`], as Xray reaps it (hub.go `upsertSession`).

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::Notify;

use super::reorder::{Admission, PushError, Reorder};
use super::tunnel::BoxRead;

/// How long a session waits for its download request.
pub const UNCONNECTED_TTL: Duration = Duration::from_secs(30);

/// The sessions of one inbound.
pub struct Sessions {
    map: Mutex<HashMap<String, Arc<Session>>>,
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
                reader: None,
            }),
            window_moved: Notify::new(),
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
                match st.reorder.admit(seq) {
                    Admission::Accept => break Ok(()),
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
        st.reorder.push(seq, data).map_err(UploadError::Push)?;
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
