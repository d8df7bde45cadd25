//! WebSocket handshake parsers (server and client side) and the frame decoder on any bytes.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    skiff_transport::fuzz::fuzz_ws(data);
});
