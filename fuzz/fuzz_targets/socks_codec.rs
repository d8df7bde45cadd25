//! Every SOCKS parser (greeting, RFC 1929 auth, request, SOCKS4/4a, UDP header) on any bytes.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    skiff_proto::socks::fuzz_parse_all(data);
});
