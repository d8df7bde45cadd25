//! Shadowsocks AEAD interop with Debian's shadowsocks-libev 3.3.5, both directions:
//! ss-tunnel → Skiff server, and Skiff client → ss-server (with `-u` for UDP), for
//! aes-128-gcm, aes-256-gcm and chacha20-ietf-poly1305. TCP: 64 MiB each way at once,
//! SHA-256 checked; UDP: 200 datagrams echoed. `.ci/run` installs shadowsocks-libev; outside
//! CI a machine without it skips these tests with a message.

mod ss_common;

use ss_common::{MIB, Peer, Setup, run_tcp, run_udp};

const BULK: u64 = 64 * MIB;
const PASSWORD: &str = "interop-libev-password";

fn tcp(client: Peer, server: Peer, method: &str) {
    run_tcp(&Setup::simple(client, server, method, PASSWORD), BULK);
}

fn udp(client: Peer, server: Peer, method: &str) {
    run_udp(&Setup::simple(client, server, method, PASSWORD));
}

#[test]
fn libev_client_skiff_server_aes_128_gcm_tcp() {
    tcp(Peer::SsLibev, Peer::Skiff, "aes-128-gcm");
}
#[test]
fn skiff_client_libev_server_aes_128_gcm_tcp() {
    tcp(Peer::Skiff, Peer::SsLibev, "aes-128-gcm");
}
#[test]
fn libev_client_skiff_server_aes_256_gcm_tcp() {
    tcp(Peer::SsLibev, Peer::Skiff, "aes-256-gcm");
}
#[test]
fn skiff_client_libev_server_aes_256_gcm_tcp() {
    tcp(Peer::Skiff, Peer::SsLibev, "aes-256-gcm");
}
#[test]
fn libev_client_skiff_server_chacha20_tcp() {
    tcp(Peer::SsLibev, Peer::Skiff, "chacha20-ietf-poly1305");
}
#[test]
fn skiff_client_libev_server_chacha20_tcp() {
    tcp(Peer::Skiff, Peer::SsLibev, "chacha20-ietf-poly1305");
}
#[test]
fn libev_client_skiff_server_aes_128_gcm_udp() {
    udp(Peer::SsLibev, Peer::Skiff, "aes-128-gcm");
}
#[test]
fn skiff_client_libev_server_aes_128_gcm_udp() {
    udp(Peer::Skiff, Peer::SsLibev, "aes-128-gcm");
}
#[test]
fn libev_client_skiff_server_aes_256_gcm_udp() {
    udp(Peer::SsLibev, Peer::Skiff, "aes-256-gcm");
}
#[test]
fn skiff_client_libev_server_aes_256_gcm_udp() {
    udp(Peer::Skiff, Peer::SsLibev, "aes-256-gcm");
}
#[test]
fn libev_client_skiff_server_chacha20_udp() {
    udp(Peer::SsLibev, Peer::Skiff, "chacha20-ietf-poly1305");
}
#[test]
fn skiff_client_libev_server_chacha20_udp() {
    udp(Peer::Skiff, Peer::SsLibev, "chacha20-ietf-poly1305");
}
