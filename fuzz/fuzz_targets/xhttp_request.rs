//! XHTTP's server side on any bytes: request heads and the request decision (paths, session
//! ids, sequence numbers, padding), chunked bodies, the upload reassembly.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    skiff_transport::fuzz::fuzz_xhttp(data);
});
