//! Xray's gRPC transport: the gRPC message splitter and the Hunk/MultiHunk decoder on any
//! bytes, whole and cut into chunks.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    skiff_transport::fuzz::fuzz_grpc(data);
});
