//! mKCP packets (header, seal, segments) into a session, with every header kind, with and
//! without seed; half the packets are framed validly so segment parsing and the ARQ are
//! reached.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    skiff_kcp::fuzz::fuzz_mkcp_packets(data);
});
