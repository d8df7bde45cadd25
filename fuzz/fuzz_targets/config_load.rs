//! The config loader (comment stripping, JSON, Xray schema, validation) on any text.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data).into_owned();
    let _ = skiff_config::load_sources(&[skiff_config::Source { name: "fuzz.json".into(), text }]);
});
