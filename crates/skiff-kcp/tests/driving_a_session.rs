//! The crate documentation's "driving one session" loop, compiled and run: two sessions
//! wired back to back exchange a message with nothing but datagrams and a clock.

use skiff_kcp::{KcpConfig, KcpSession};

#[test]
fn two_sessions_exchange_a_message_through_datagrams_only() {
    let mut client = KcpSession::new(0x1234, &KcpConfig::kcptun_default(true)).unwrap();
    let mut server = KcpSession::new(0x1234, &KcpConfig::kcptun_default(false)).unwrap();
    let message: Vec<u8> = (0..50_000u32).map(|i| (i % 251) as u8).collect();
    let mut sent = 0;
    let mut received = Vec::new();
    let mut out = Vec::new();
    let mut buf = [0u8; 16384];
    // Bounded: 10 simulated seconds in 10 ms steps.
    for step in 0..1000u32 {
        let now = step * 10;
        if sent < message.len() {
            sent += client.send(&message[sent..]);
        }
        client.update(now);
        while client.poll_datagram(&mut out) {
            server.handle_datagram(&out, now);
        }
        server.update(now);
        while server.poll_datagram(&mut out) {
            client.handle_datagram(&out, now);
        }
        loop {
            let n = server.recv(&mut buf);
            if n == 0 {
                break;
            }
            received.extend_from_slice(&buf[..n]);
        }
        if received.len() == message.len() {
            break;
        }
    }
    assert_eq!(received, message);
}
