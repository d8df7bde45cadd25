//! Shadowsocks AEAD interop with Debian's v2ray 4.34, both directions (v2ray client → Skiff
//! server, Skiff client → v2ray server), for aes-128-gcm, aes-256-gcm and
//! chacha20-ietf-poly1305: TCP 64 MiB each way at once, SHA-256 checked; UDP 200 datagrams
//! echoed. (v2ray 4.34 has no 2022 methods.) `.ci/run` installs v2ray; outside CI a machine
//! without it skips these tests with a message.

mod ss_common;

use ss_common::{MIB, Peer, Setup, run_tcp, run_udp};

const BULK: u64 = 64 * MIB;
const PASSWORD: &str = "interop-v2ray-password";

fn tcp(client: Peer, server: Peer, method: &str) {
    run_tcp(&Setup::simple(client, server, method, PASSWORD), BULK);
}

fn udp(client: Peer, server: Peer, method: &str) {
    run_udp(&Setup::simple(client, server, method, PASSWORD));
}

#[test]
fn v2ray_client_skiff_server_aes_128_gcm_tcp() {
    tcp(Peer::V2ray, Peer::Skiff, "aes-128-gcm");
}
#[test]
fn skiff_client_v2ray_server_aes_128_gcm_tcp() {
    tcp(Peer::Skiff, Peer::V2ray, "aes-128-gcm");
}
#[test]
fn v2ray_client_skiff_server_aes_256_gcm_tcp() {
    tcp(Peer::V2ray, Peer::Skiff, "aes-256-gcm");
}
#[test]
fn skiff_client_v2ray_server_aes_256_gcm_tcp() {
    tcp(Peer::Skiff, Peer::V2ray, "aes-256-gcm");
}
#[test]
fn v2ray_client_skiff_server_chacha20_tcp() {
    tcp(Peer::V2ray, Peer::Skiff, "chacha20-ietf-poly1305");
}
#[test]
fn skiff_client_v2ray_server_chacha20_tcp() {
    tcp(Peer::Skiff, Peer::V2ray, "chacha20-ietf-poly1305");
}
#[test]
fn v2ray_client_skiff_server_aes_128_gcm_udp() {
    udp(Peer::V2ray, Peer::Skiff, "aes-128-gcm");
}
#[test]
fn skiff_client_v2ray_server_aes_128_gcm_udp() {
    udp(Peer::Skiff, Peer::V2ray, "aes-128-gcm");
}
#[test]
fn v2ray_client_skiff_server_aes_256_gcm_udp() {
    udp(Peer::V2ray, Peer::Skiff, "aes-256-gcm");
}
#[test]
fn skiff_client_v2ray_server_aes_256_gcm_udp() {
    udp(Peer::Skiff, Peer::V2ray, "aes-256-gcm");
}
#[test]
fn v2ray_client_skiff_server_chacha20_udp() {
    udp(Peer::V2ray, Peer::Skiff, "chacha20-ietf-poly1305");
}
#[test]
fn skiff_client_v2ray_server_chacha20_udp() {
    udp(Peer::Skiff, Peer::V2ray, "chacha20-ietf-poly1305");
}
