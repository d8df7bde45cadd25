//! A TLS 1.3 client handshake of our own, for the connections whose ClientHello we must
//! choose byte for byte: REALITY (its authentication lives in the session ID, sealed over the
//! ClientHello itself) and browser fingerprints.
//!
//! Why our own: rustls builds its ClientHello internally (no chosen extension order, GREASE,
//! ECH GREASE, session ID or key shares), and its lower-level APIs stop above the hello.
//! No maintained Rust crate offers uTLS-style hellos. A client handshake without resumption,
//! early data, client certificates or HelloRetryRequest is small: ServerHello, the key
//! schedule, EncryptedExtensions, Certificate, CertificateVerify, Finished, our Finished.
//! After it, the traffic keys go to the same record layer (`tls/records.rs`) the rustls path
//! hands its keys to, so Vision's splice works the same over both.
//!
//! What it checks: TLS 1.3 chosen, our session ID echoed, an offered suite and group, the
//! server's Finished (which proves the server holds the key schedule). The certificate chain
//! is handed to the caller with whether CertificateVerify is a valid signature by its leaf
//! (any key type rustls' aws-lc-rs provider verifies): REALITY then checks the HMAC in its
//! temporary certificate, a fingerprinted TLS client the `pinnedPeerCertSha256` pins. A
//! HelloRetryRequest fails the handshake cleanly.
//!
//! * [`messages`]: handshake message reassembly and parsers (sans-IO; fuzzed).
//! * [`schedule`]: the key schedule (sans-IO; RFC 8448's trace).
//! * [`certificate`]: the two facts REALITY needs from the leaf's DER.
//! * [`handshake`]: the async driver.
//! * [`fingerprinted`]: `tlsSettings.fingerprint` on an ordinary TLS client.

pub mod certificate;
pub mod fingerprinted;
pub mod handshake;
pub mod messages;
pub mod schedule;

pub use handshake::{Established, handshake};
pub use messages::HandshakeError;
