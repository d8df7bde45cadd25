//! Mux.Cool frames on any bytes: parsed frames stay inside the input, UDP Keep frames and
//! New frames round-trip.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    skiff_proto::mux::fuzz_parse_all(data);
});
