//! Xray's HTTP header obfuscation: the server's judge of a request head (whole and split)
//! and the client's skip of the response head, on any bytes.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    skiff_transport::fuzz::fuzz_http_header(data);
});
