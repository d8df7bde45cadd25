//! XTLS Vision's unpadding parser and inner-TLS filter on any bytes, fed in pieces.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    skiff_proto::vless::vision::fuzz_unpad(data);
});
