//! The QUIC Initial sniffer (header protection, AEAD, CRYPTO reassembly, SNI) on any bytes.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    skiff_sniff::fuzz::fuzz_quic_initial(data);
});
