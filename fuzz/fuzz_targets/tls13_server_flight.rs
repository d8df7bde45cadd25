//! Our TLS 1.3 client's parsers of what a server sends (ServerHello, EncryptedExtensions,
//! Certificate, CertificateVerify, message reassembly) and REALITY's leaf-certificate reader,
//! on arbitrary bytes: they must return, never panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    skiff_transport::fuzz::fuzz_tls13_server_flight(data);
});
