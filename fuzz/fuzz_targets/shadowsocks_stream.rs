//! Shadowsocks on any bytes: the stream decoder (whole and byte by byte), an encode/decode
//! round trip of the input as payload, the address and 2022 header parsers, and the UDP
//! packet openers of every method.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    skiff_proto::shadowsocks::fuzz_parse_all(data);
});
