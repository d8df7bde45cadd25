//! A Mux.Cool server connection fed any bytes: sub-connections opened, answered, ended,
//! refused past the bound, given up when they stall; nothing panics and it ends in time.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    skiff_proto::mux::fuzz_serve(data);
});
