//! REALITY's server on any bytes: the client's first flight (record reassembly, ClientHello
//! parsing, authentication, with the session ID also re-sealed under the right key so the
//! version/time/short id/replay checks run) and the target's first record.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    skiff_transport::fuzz::fuzz_reality(data);
});
