//! `cc=` in the link spec: both namespaces default to the named TCP congestion control and
//! sockets made there use it; an unknown name fails before any namespace is made (needs root
//! and /dev/net/tun; skipped otherwise).

use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;

use skiff_bench::link::{self, Link, LinkSpec};

fn up(text: &str) -> std::io::Result<Link> {
    let spec: LinkSpec = text.parse().expect("spec");
    Link::up(&spec)
}

/// TCP_CONGESTION of a fresh loopback connection made inside `ns`.
fn socket_cc(ns: &str) -> String {
    link::run_in(ns, || {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let stream = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let mut name = [0u8; 16];
        let mut len = name.len() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into `name`, which outlives the call.
        let rc = unsafe {
            libc::getsockopt(
                stream.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_CONGESTION,
                name.as_mut_ptr().cast(),
                &mut len,
            )
        };
        assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
        let name = &name[..len as usize];
        let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
        String::from_utf8_lossy(&name[..end]).into_owned()
    })
    .unwrap()
}

fn host(file: &str) -> String {
    std::fs::read_to_string(format!("/proc/sys/net/ipv4/{file}")).unwrap()
}

#[test]
fn cc_sets_both_namespaces_and_their_sockets() {
    if let Err(why) = link::check_support() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs as root with /dev/net/tun: {why}"
        );
        println!("skipped: {why}");
        return;
    }
    let host_before = (
        host("tcp_congestion_control"),
        host("tcp_allowed_congestion_control"),
    );
    let default = up("delay=0ms,loss=0%").expect("link up");
    let system = default.cc().to_string();
    assert!(!system.is_empty());
    assert_eq!(
        default.describe(),
        format!("delay=0s,loss=0%,cc={system} (default)")
    );
    drop(default);
    // Every algorithm the kernel offers, whether or not the host allows it to unprivileged
    // sockets (a namespace may only default to an allowed one: set_in allows it for a moment).
    for wanted in link::cc::available().unwrap() {
        let link = up(&format!("delay=0ms,loss=0%,cc={wanted}")).expect("link up");
        assert_eq!(link.cc(), wanted);
        assert_eq!(link.describe(), format!("delay=0s,loss=0%,cc={wanted}"));
        for ns in [link.ns_b(), link.ns_c()] {
            assert_eq!(link::cc::current_in(ns).unwrap(), wanted);
            assert_eq!(socket_cc(ns), wanted, "{ns}");
        }
        // The host's own settings are left as they were.
        let host_now = (
            host("tcp_congestion_control"),
            host("tcp_allowed_congestion_control"),
        );
        assert_eq!(host_now, host_before);
    }
}

#[test]
fn an_unknown_cc_is_refused_with_the_kernels_list() {
    if let Err(why) = link::check_support() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs as root with /dev/net/tun: {why}"
        );
        println!("skipped: {why}");
        return;
    }
    let e = up("delay=0ms,loss=0%,cc=no_such_cc")
        .unwrap_err()
        .to_string();
    assert!(e.contains("`no_such_cc` is not available"), "{e}");
    assert!(e.contains("modprobe tcp_no_such_cc"), "{e}");
    assert!(e.contains("offers: ") && e.contains("reno"), "{e}");
}
