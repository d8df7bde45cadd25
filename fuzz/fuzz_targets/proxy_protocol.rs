//! The PROXY protocol v1/v2 parser on any bytes.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    skiff_proto::proxy_protocol::fuzz_parse_all(data);
});
