//! ClientHello peek against real ClientHellos.
//!
//! Vectors in `tests/vectors/*.bin` were captured on loopback with
//! `tests/vectors/capture_client_hello.py <port> <file>` (accepts one TCP connection and saves
//! the first TLS record's bytes) while running OpenSSL 3.0 `openssl s_client`:
//! * `tls13_sni_alpn.bin`: `-connect 127.0.0.1:41001 -servername example.com -alpn h2,http/1.1`
//! * `tls12_nosni.bin`:    `-connect 127.0.0.1:41002 -noservername -tls1_2`
//! * `tls13_sni.bin`:      `-connect 127.0.0.1:41003 -servername www.skiff.test`

use proptest::prelude::*;
use skiff_transport::tls::{Peek, peek_client_hello};

const TLS13_SNI_ALPN: &[u8] = include_bytes!("vectors/tls13_sni_alpn.bin");
const TLS12_NOSNI: &[u8] = include_bytes!("vectors/tls12_nosni.bin");
const TLS13_SNI: &[u8] = include_bytes!("vectors/tls13_sni.bin");

fn hello(buf: &[u8]) -> skiff_transport::tls::ClientHelloInfo {
    match peek_client_hello(buf) {
        Peek::ClientHello(info) => info,
        other => panic!("{other:?}"),
    }
}

/// Re-frames a single-record ClientHello into records carrying `sizes` bytes each (the last
/// one takes the rest), as a client with a small record size would send it.
fn refragment(single: &[u8], sizes: &[usize]) -> Vec<u8> {
    let (hdr, msg) = single.split_at(5);
    let mut out = Vec::new();
    let mut rest = msg;
    for &s in sizes.iter().chain(std::iter::once(&usize::MAX)) {
        if rest.is_empty() {
            break;
        }
        let (a, b) = rest.split_at(s.min(rest.len()));
        out.extend_from_slice(&hdr[..3]);
        out.extend_from_slice(&(a.len() as u16).to_be_bytes());
        out.extend_from_slice(a);
        rest = b;
    }
    out
}

#[test]
fn openssl_tls13_with_sni_and_alpn() {
    let info = hello(TLS13_SNI_ALPN);
    assert_eq!(info.sni.as_deref(), Some("example.com"));
    assert_eq!(info.alpn, ["h2", "http/1.1"]);
    assert_eq!(info.legacy_version, 0x0303);
    assert!(info.offers_tls13());
    assert!(info.supported_versions.contains(&0x0303));
    assert!(info.cipher_suites.contains(&0x1301));
    assert_eq!(info.consumed, TLS13_SNI_ALPN.len());
    assert_eq!(info.session_id_len, 32);
}

#[test]
fn openssl_tls12_without_sni() {
    let info = hello(TLS12_NOSNI);
    assert_eq!(info.sni, None);
    assert!(info.alpn.is_empty());
    assert!(!info.offers_tls13());
    assert_eq!(info.legacy_version, 0x0303);
    assert!(!info.extensions.contains(&0));
}

#[test]
fn openssl_tls13_sni_only() {
    let info = hello(TLS13_SNI);
    assert_eq!(info.sni.as_deref(), Some("www.skiff.test"));
    assert!(info.alpn.is_empty());
    assert!(info.offers_tls13());
}

#[test]
fn every_prefix_is_incomplete() {
    for v in [TLS13_SNI_ALPN, TLS12_NOSNI, TLS13_SNI] {
        for cut in 0..v.len() {
            assert_eq!(peek_client_hello(&v[..cut]), Peek::Incomplete, "cut {cut}");
        }
    }
}

#[test]
fn spread_over_several_records() {
    let want = hello(TLS13_SNI_ALPN);
    for sizes in [&[1usize][..], &[2, 1, 1], &[3], &[50, 50, 50], &[100]] {
        let wire = refragment(TLS13_SNI_ALPN, sizes);
        let mut got = hello(&wire);
        assert_eq!(got.consumed, wire.len());
        got.consumed = want.consumed;
        assert_eq!(got, want, "{sizes:?}");
        for cut in 0..wire.len() {
            assert_eq!(peek_client_hello(&wire[..cut]), Peek::Incomplete);
        }
    }
    // Application data after the hello (a later record) is not consumed.
    let mut wire = TLS13_SNI_ALPN.to_vec();
    wire.extend_from_slice(&[0x17, 0x03, 0x03, 0x00, 0x01, 0x00]);
    assert_eq!(hello(&wire).consumed, TLS13_SNI_ALPN.len());
}

#[test]
fn not_tls() {
    assert_eq!(peek_client_hello(b"GET / HTTP/1.1\r\n"), Peek::NotTls);
    assert_eq!(peek_client_hello(b"SSH-2.0-OpenSSH"), Peek::NotTls);
    assert_eq!(peek_client_hello(&[0x16, 0x01]), Peek::NotTls);
    assert_eq!(peek_client_hello(&[0x80, 0x2e, 0x01]), Peek::NotTls); // SSLv2 hello
    assert_eq!(peek_client_hello(&[0x16]), Peek::Incomplete);
}

#[test]
fn malformed() {
    let mut bad = TLS13_SNI_ALPN.to_vec();
    bad[5] = 2; // ServerHello type
    assert!(matches!(peek_client_hello(&bad), Peek::Malformed(_)));
    let mut zero = TLS13_SNI_ALPN.to_vec();
    zero[3] = 0;
    zero[4] = 0;
    assert!(matches!(peek_client_hello(&zero), Peek::Malformed(_)));
    // A handshake message length beyond the cap.
    let huge = [0x16, 0x03, 0x01, 0x00, 0x04, 0x01, 0xff, 0xff, 0xff];
    assert!(matches!(peek_client_hello(&huge), Peek::Malformed(_)));
    // Truncate the body inside the record: declared lengths no longer fit.
    let mut short = TLS13_SNI_ALPN.to_vec();
    let n = short.len() - 5 - 4 - 10;
    short[6..9].copy_from_slice(&(n as u32).to_be_bytes()[1..]);
    short.truncate(short.len() - 10);
    let rec = (short.len() - 5) as u16;
    short[3..5].copy_from_slice(&rec.to_be_bytes());
    assert!(matches!(peek_client_hello(&short), Peek::Malformed(_)));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..600)) {
        skiff_transport::fuzz::fuzz_client_hello(&data);
        let mut tls = vec![0x16, 0x03, 0x01];
        tls.extend_from_slice(&data);
        skiff_transport::fuzz::fuzz_client_hello(&tls);
    }

    #[test]
    fn mutated_real_hello_never_panics(pos in any::<prop::sample::Index>(), byte in any::<u8>(), cut in any::<prop::sample::Index>()) {
        let mut v = TLS13_SNI_ALPN.to_vec();
        let i = pos.index(v.len());
        v[i] = byte;
        let c = cut.index(v.len() + 1);
        skiff_transport::fuzz::fuzz_client_hello(&v[..c]);
    }
}
