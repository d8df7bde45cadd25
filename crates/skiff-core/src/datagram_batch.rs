//! Several UDP datagrams per system call: Linux's `sendmmsg` and `recvmmsg` behind tokio's
//! readiness. A FEC group's shards leave together and arrive together; at the rates a game or
//! VoIP flow runs, one call per shard each way is most of what the tunnel costs, so these send
//! a group in one call and read whatever has arrived in one. Elsewhere, one call per datagram.

use std::io;
use std::net::SocketAddr;

use tokio::net::UdpSocket;

/// Datagrams one call moves at most.
pub const BATCH: usize = 32;

/// Sends every datagram of `datagrams`, to `to` or (None) to the connected peer, as few calls
/// as the kernel takes. A datagram the kernel refuses (a port-unreachable reported on a
/// connected socket, say) is skipped, the rest still sent; the first such error is returned.
pub async fn send_batch(
    socket: &UdpSocket,
    datagrams: &[Vec<u8>],
    to: Option<SocketAddr>,
) -> io::Result<()> {
    let mut first_error = None;
    let mut done = 0;
    while done < datagrams.len() {
        let chunk = &datagrams[done..datagrams.len().min(done + BATCH)];
        match socket
            .async_io(tokio::io::Interest::WRITABLE, || {
                send_some(socket, chunk, to)
            })
            .await
        {
            Ok(sent) => done += sent.max(1),
            Err(e) => {
                // The datagram at `done` failed: skip it, keep the error.
                first_error.get_or_insert(e);
                done += 1;
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

#[cfg(target_os = "linux")]
fn send_some(socket: &UdpSocket, chunk: &[Vec<u8>], to: Option<SocketAddr>) -> io::Result<usize> {
    use std::os::fd::AsRawFd;
    let address = to.map(socket2::SockAddr::from);
    // SAFETY: all-zero is a valid value of these plain C structs.
    let mut iovecs: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut messages: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
    for (i, datagram) in chunk.iter().enumerate() {
        iovecs[i].iov_base = datagram.as_ptr() as *mut libc::c_void;
        iovecs[i].iov_len = datagram.len();
        let header = &mut messages[i].msg_hdr;
        header.msg_iov = &mut iovecs[i];
        header.msg_iovlen = 1;
        if let Some(a) = &address {
            header.msg_name = a.as_ptr() as *mut libc::c_void;
            header.msg_namelen = a.len();
        }
    }
    // SAFETY: `messages[..chunk.len()]` point at iovecs over live datagrams and, when set, at
    // a live socket address of the length given; the kernel only reads them.
    let sent = unsafe {
        libc::sendmmsg(
            socket.as_raw_fd(),
            messages.as_mut_ptr(),
            chunk.len() as libc::c_uint,
            libc::MSG_DONTWAIT,
        )
    };
    if sent < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(sent as usize)
    }
}

#[cfg(not(target_os = "linux"))]
fn send_some(socket: &UdpSocket, chunk: &[Vec<u8>], to: Option<SocketAddr>) -> io::Result<usize> {
    match to {
        Some(to) => socket.try_send_to(&chunk[0], to)?,
        None => socket.try_send(&chunk[0])?,
    };
    Ok(1)
}

/// Buffers for up to [`BATCH`] received datagrams, refilled by each [`RecvBatch::recv`].
pub struct RecvBatch {
    buffers: Vec<Vec<u8>>,
    lengths: [usize; BATCH],
    sources: [Option<SocketAddr>; BATCH],
    count: usize,
}

impl RecvBatch {
    /// `slots` datagrams (at most [`BATCH`]) of up to `size` bytes each; a longer one comes back
    /// cut to `size`, so give one byte more than the largest you accept to tell it apart.
    pub fn new(slots: usize, size: usize) -> RecvBatch {
        RecvBatch {
            buffers: vec![vec![0u8; size]; slots.clamp(1, BATCH)],
            lengths: [0; BATCH],
            sources: [None; BATCH],
            count: 0,
        }
    }

    /// Waits for at least one datagram and takes every one already queued, up to the slots;
    /// returns how many.
    pub async fn recv(&mut self, socket: &UdpSocket) -> io::Result<usize> {
        self.count = 0;
        let slots = self.buffers.len();
        loop {
            socket.readable().await?;
            let mut drained = 0;
            let result = socket.try_io(tokio::io::Interest::READABLE, || {
                let got = self.recv_some(socket)?;
                // `recvmmsg` stops short only when the queue is empty: say so to tokio now,
                // which saves the call that would otherwise find it empty (one per wake-up).
                // A datagram arriving after this raises a new readiness event, not lost.
                if cfg!(target_os = "linux") && got < slots {
                    drained = got;
                    return Err(io::ErrorKind::WouldBlock.into());
                }
                Ok(got)
            });
            match result {
                Ok(count) => {
                    self.count = count;
                    return Ok(count);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if drained > 0 {
                        self.count = drained;
                        return Ok(drained);
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Datagram `i` of the last [`RecvBatch::recv`] and its source (None if the kernel gave
    /// none this code reads).
    pub fn get(&mut self, i: usize) -> (&mut [u8], Option<SocketAddr>) {
        let i = i.min(self.count.saturating_sub(1));
        let len = self.lengths[i];
        (&mut self.buffers[i][..len], self.sources[i])
    }

    #[cfg(target_os = "linux")]
    fn recv_some(&mut self, socket: &UdpSocket) -> io::Result<usize> {
        use std::os::fd::AsRawFd;
        let slots = self.buffers.len();
        // SAFETY: all-zero is a valid value of these plain C structs.
        let mut iovecs: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut names: [libc::sockaddr_storage; BATCH] = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut messages: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        for (i, buffer) in self.buffers.iter_mut().enumerate() {
            iovecs[i].iov_base = buffer.as_mut_ptr().cast();
            iovecs[i].iov_len = buffer.len();
            let header = &mut messages[i].msg_hdr;
            header.msg_iov = &mut iovecs[i];
            header.msg_iovlen = 1;
            header.msg_name = (&mut names[i] as *mut libc::sockaddr_storage).cast();
            header.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        }
        // SAFETY: `messages[..slots]` point at iovecs over our own buffers of the lengths
        // given and at sockaddr_storage slots of the size given, all alive for the call.
        let got = unsafe {
            libc::recvmmsg(
                socket.as_raw_fd(),
                messages.as_mut_ptr(),
                slots as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if got < 0 {
            return Err(io::Error::last_os_error());
        }
        let got = got as usize;
        for i in 0..got {
            self.lengths[i] = (messages[i].msg_len as usize).min(self.buffers[i].len());
            self.sources[i] = socket_address(&names[i]);
        }
        Ok(got)
    }

    #[cfg(not(target_os = "linux"))]
    fn recv_some(&mut self, socket: &UdpSocket) -> io::Result<usize> {
        let (n, from) = socket.try_recv_from(&mut self.buffers[0])?;
        self.lengths[0] = n;
        self.sources[0] = Some(from);
        Ok(1)
    }
}

#[cfg(target_os = "linux")]
fn socket_address(name: &libc::sockaddr_storage) -> Option<SocketAddr> {
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV6};
    match i32::from(name.ss_family) {
        libc::AF_INET => {
            // SAFETY: the kernel wrote a sockaddr_in here (ss_family says so), and
            // sockaddr_storage is large and aligned enough for one.
            let a =
                unsafe { &*(name as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            Some(SocketAddr::new(
                Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)).into(),
                u16::from_be(a.sin_port),
            ))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, a sockaddr_in6.
            let a =
                unsafe { &*(name as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_batch_sent_is_a_batch_received_in_order_with_sources() {
        for ip in ["127.0.0.1", "::1"] {
            let Ok(receiver) = UdpSocket::bind((ip, 0)).await else {
                continue; // no IPv6 loopback here
            };
            let sender = UdpSocket::bind((ip, 0)).await.unwrap();
            let to = receiver.local_addr().unwrap();
            // More than one call's worth, of varied sizes.
            let datagrams: Vec<Vec<u8>> = (0..BATCH as u8 + 7)
                .map(|i| vec![i; 1 + usize::from(i) * 37])
                .collect();
            send_batch(&sender, &datagrams, Some(to)).await.unwrap();
            let mut batch = RecvBatch::new(BATCH, 4096);
            let mut got = Vec::new();
            while got.len() < datagrams.len() {
                let n = batch.recv(&receiver).await.unwrap();
                assert!(n >= 1);
                for i in 0..n {
                    let (data, from) = batch.get(i);
                    assert_eq!(from, Some(sender.local_addr().unwrap()));
                    got.push(data.to_vec());
                }
            }
            assert_eq!(got, datagrams);
        }
    }

    #[tokio::test]
    async fn connected_sends_and_cut_datagrams() {
        let receiver = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let sender = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        sender
            .connect(receiver.local_addr().unwrap())
            .await
            .unwrap();
        send_batch(&sender, &[vec![1; 10], vec![2; 100]], None)
            .await
            .unwrap();
        // Slots of 50 bytes: the second comes back cut to 50, which a caller tells apart
        // from a datagram that fit.
        let mut batch = RecvBatch::new(4, 50);
        let mut lengths = Vec::new();
        while lengths.len() < 2 {
            let n = batch.recv(&receiver).await.unwrap();
            for i in 0..n {
                lengths.push(batch.get(i).0.len());
            }
        }
        assert_eq!(lengths, [10, 50]);
        // Nothing to send is nothing sent.
        send_batch(&sender, &[], None).await.unwrap();
    }
}
