//! The VMess instruction header, sealed request and response headers and chunk stream on any
//! bytes (see skiff_proto::vmess::fuzz_parse_all for what is checked besides "never panics").
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    skiff_proto::vmess::fuzz_parse_all(data);
});
