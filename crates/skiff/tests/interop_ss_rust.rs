//! Shadowsocks 2022 interop with shadowsocks-rust (sslocal tunnel / ssserver), both
//! directions, TCP (64 MiB each way, SHA-256) and UDP (200 datagrams echoed), for
//! 2022-blake3-aes-128-gcm, 2022-blake3-aes-256-gcm and 2022-blake3-chacha20-poly1305; plus
//! multi-user servers with identity headers (SIP023) both ways. `.ci/run` installs
//! shadowsocks-rust with `cargo install`; outside CI a machine without `ssserver` skips these
//! tests with a note.

mod ss_common;

use ss_common::{MIB, Peer, Setup, psk, run_tcp, run_udp};

const BULK: u64 = 64 * MIB;

fn key_len(method: &str) -> usize {
    if method.contains("128") { 16 } else { 32 }
}

fn setup(client: Peer, server: Peer, method: &str) -> Setup<'_> {
    Setup::simple(client, server, method, &psk(key_len(method), 7))
}

/// C is a multi-user server: its own key, and the user's key B names by identity header.
fn eih(client: Peer, server: Peer, method: &str) -> Setup<'_> {
    Setup {
        user_key: Some(psk(key_len(method), 99)),
        ..setup(client, server, method)
    }
}

const AES128: &str = "2022-blake3-aes-128-gcm";
const AES256: &str = "2022-blake3-aes-256-gcm";
const CHACHA: &str = "2022-blake3-chacha20-poly1305";

#[test]
fn rust_client_skiff_server_aes_128_tcp() {
    run_tcp(&setup(Peer::SsRust, Peer::Skiff, AES128), BULK);
}
#[test]
fn skiff_client_rust_server_aes_128_tcp() {
    run_tcp(&setup(Peer::Skiff, Peer::SsRust, AES128), BULK);
}
#[test]
fn rust_client_skiff_server_aes_256_tcp() {
    run_tcp(&setup(Peer::SsRust, Peer::Skiff, AES256), BULK);
}
#[test]
fn skiff_client_rust_server_aes_256_tcp() {
    run_tcp(&setup(Peer::Skiff, Peer::SsRust, AES256), BULK);
}
#[test]
fn rust_client_skiff_server_chacha20_tcp() {
    run_tcp(&setup(Peer::SsRust, Peer::Skiff, CHACHA), BULK);
}
#[test]
fn skiff_client_rust_server_chacha20_tcp() {
    run_tcp(&setup(Peer::Skiff, Peer::SsRust, CHACHA), BULK);
}
#[test]
fn rust_client_skiff_server_aes_128_udp() {
    run_udp(&setup(Peer::SsRust, Peer::Skiff, AES128));
}
#[test]
fn skiff_client_rust_server_aes_128_udp() {
    run_udp(&setup(Peer::Skiff, Peer::SsRust, AES128));
}
#[test]
fn rust_client_skiff_server_aes_256_udp() {
    run_udp(&setup(Peer::SsRust, Peer::Skiff, AES256));
}
#[test]
fn skiff_client_rust_server_aes_256_udp() {
    run_udp(&setup(Peer::Skiff, Peer::SsRust, AES256));
}
#[test]
fn rust_client_skiff_server_chacha20_udp() {
    run_udp(&setup(Peer::SsRust, Peer::Skiff, CHACHA));
}
#[test]
fn skiff_client_rust_server_chacha20_udp() {
    run_udp(&setup(Peer::Skiff, Peer::SsRust, CHACHA));
}
#[test]
fn rust_client_skiff_multi_user_server_identity_headers() {
    run_tcp(&eih(Peer::SsRust, Peer::Skiff, AES128), 8 * MIB);
    run_udp(&eih(Peer::SsRust, Peer::Skiff, AES256));
}
#[test]
fn skiff_client_rust_multi_user_server_identity_headers() {
    run_tcp(&eih(Peer::Skiff, Peer::SsRust, AES256), 8 * MIB);
    run_udp(&eih(Peer::Skiff, Peer::SsRust, AES128));
}
