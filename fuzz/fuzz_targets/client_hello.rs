//! The TLS ClientHello peek (SNI/ALPN for fallbacks) on any bytes.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    skiff_transport::fuzz::fuzz_client_hello(data);
});
