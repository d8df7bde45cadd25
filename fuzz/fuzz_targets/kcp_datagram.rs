//! KCP session input (crypt header, FEC, segments) and peek_conv on any bytes, with each crypt;
//! half the datagrams are sealed with a valid checksum so FEC and ARQ parsing are reached.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    skiff_kcp::fuzz::fuzz_datagrams(data);
});
