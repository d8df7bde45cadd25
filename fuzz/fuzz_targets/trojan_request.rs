//! The Trojan request header and UDP packet framing on any bytes.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    skiff_proto::trojan::codec::fuzz_parse_all(data);
});
