//! Heap held by one session: fresh, and idle again after a bulk transfer (DESIGN: memory per
//! idle connection is a tracked figure). A counting allocator measures live bytes; this test
//! binary runs this one test only, so nothing else allocates meanwhile.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use skiff_kcp::{KcpConfig, KcpSession};

struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator unchanged and only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        // SAFETY: same layout contract as the caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        // SAFETY: `p` came from `alloc` with this layout.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as isize - l.size() as isize, Ordering::Relaxed);
        // SAFETY: as for `realloc` itself.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

#[test]
fn session_memory_fresh_and_idle_after_bulk() {
    let ccfg = KcpConfig::kcptun_default(true);
    let scfg = KcpConfig::kcptun_default(false);
    // Warm the shared cipher cache so it is not counted per session.
    drop(KcpSession::new(1, &ccfg).unwrap());
    let data = vec![0x5au8; 1 << 20];
    let mut d = Vec::with_capacity(2048);
    let mut buf = vec![0u8; 65536];
    let base = live();
    let mut c = KcpSession::new(7, &ccfg).unwrap();
    let mut s = KcpSession::new(7, &scfg).unwrap();
    let fresh = (live() - base) / 2;

    let (mut sent, mut got) = (0, 0);
    let mut now = 0u32;
    for _ in 0..200_000 {
        if sent < data.len() {
            sent += c.send(&data[sent..]);
        }
        c.update(now);
        s.update(now);
        while c.poll_datagram(&mut d) {
            s.handle_datagram(&d, now);
        }
        while s.poll_datagram(&mut d) {
            c.handle_datagram(&d, now);
        }
        loop {
            let n = s.recv(&mut buf);
            if n == 0 {
                break;
            }
            got += n;
        }
        if got == data.len() && c.wait_snd() == 0 {
            break;
        }
        now += 1;
    }
    assert_eq!(got, data.len());
    // Let acks settle, drain everything, then measure both sessions idle.
    for _ in 0..200 {
        now += 10;
        c.update(now);
        s.update(now);
        while c.poll_datagram(&mut d) {
            s.handle_datagram(&d, now);
        }
        while s.poll_datagram(&mut d) {
            c.handle_datagram(&d, now);
        }
    }
    // `d` now holds a buffer swapped out of a session and the session one of ours: same size.
    let idle = (live() - base) / 2;
    println!("per session heap: fresh {fresh} B, idle after 1 MiB {idle} B");
    assert!(fresh < 8 * 1024, "fresh session holds {fresh} B");
    // Spare-buffer pools and the FEC encoder's shard cache stay allocated: bounded, not tiny.
    assert!(idle < 64 * 1024, "idle session holds {idle} B");
    drop((c, s));
}
