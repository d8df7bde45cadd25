//! The HTTP proxy's request parser, response parser and body framer on any bytes.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    skiff_proto::http::fuzz_parse_all(data);
});
