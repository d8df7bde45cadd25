//! What each browser sends, as Xray 26.7's uTLS sends it (captured on loopback from
//! `xray` with `fingerprint` set to `chrome`, `firefox` and `safari`; the comparison test in
//! `tests/fingerprint_vs_xray.rs` keeps these honest). Values that change per connection
//! (GREASE, keys, ECH GREASE bytes, Chrome's extension order) are placeholders here and are
//! filled in by [`super::hello`].

/// A GREASE placeholder (RFC 8701) in a list of u16 values: the builder writes the
/// connection's GREASE value for that slot.
pub const GREASE: u16 = 0x0a0a;

/// Named groups (RFC 8446 §4.2.7 and the hybrid draft).
pub const X25519: u16 = 0x001d;
pub const SECP256R1: u16 = 0x0017;
pub const X25519MLKEM768: u16 = 0x11ec;

/// One extension of a ClientHello, in the order a browser lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ext {
    /// A GREASE extension: the first one empty, the second one a single zero byte (as
    /// BoringSSL does), each with its own GREASE value.
    Grease { second: bool },
    /// server_name with the connection's name (left out for an IP literal, as browsers do).
    ServerName,
    /// application_layer_protocol_negotiation with the connection's protocols (left out when
    /// there are none).
    Alpn,
    /// supported_groups; [`GREASE`] marks the GREASE slot.
    Groups(&'static [u16]),
    /// key_share with one share per group listed; [`GREASE`] gets Chrome's one zero byte.
    KeyShare(&'static [u16]),
    /// supported_versions; [`GREASE`] marks the GREASE slot.
    Versions(&'static [u16]),
    /// encrypted_client_hello as GREASE (draft-ietf-tls-esni §6.2): HKDF-SHA256 with one of
    /// the AEADs (HPKE ids: 1 AES-128-GCM, 3 ChaCha20-Poly1305) picked per connection, as
    /// uTLS does; random config id, random 32-byte `enc`, and a random payload of one of
    /// these lengths.
    EchGrease {
        aeads: &'static [u16],
        payload_lens: &'static [u16],
    },
    /// Anything whose body never changes: its type and body bytes.
    Fixed(u16, &'static [u8]),
}

/// Which extensions a browser keeps in place while it shuffles the rest (Chrome since 106
/// shuffles everything but GREASE; uTLS does the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    AsListed,
    ShuffleAllButGrease,
}

/// One browser's ClientHello shape.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    pub name: &'static str,
    pub cipher_suites: &'static [u16],
    pub extensions: &'static [Ext],
    pub order: Order,
}

const EXTENDED_MASTER_SECRET: Ext = Ext::Fixed(0x0017, &[]);
const RENEGOTIATION_INFO: Ext = Ext::Fixed(0xff01, &[0]);
const EC_POINT_FORMATS: Ext = Ext::Fixed(0x000b, &[1, 0]);
const SESSION_TICKET: Ext = Ext::Fixed(0x0023, &[]);
const STATUS_REQUEST: Ext = Ext::Fixed(0x0005, &[1, 0, 0, 0, 0]);
const SCT: Ext = Ext::Fixed(0x0012, &[]);
const PSK_MODES_DHE: Ext = Ext::Fixed(0x002d, &[1, 1]);

/// Chrome 133 (uTLS `HelloChrome_133`, Xray's `chrome`).
pub const CHROME: Spec = Spec {
    name: "chrome",
    cipher_suites: &[
        GREASE, 0x1301, 0x1302, 0x1303, 0xc02b, 0xc02f, 0xc02c, 0xc030, 0xcca9, 0xcca8, 0xc013,
        0xc014, 0x009c, 0x009d, 0x002f, 0x0035,
    ],
    extensions: &[
        Ext::Grease { second: false },
        Ext::ServerName,
        EXTENDED_MASTER_SECRET,
        RENEGOTIATION_INFO,
        Ext::Groups(&[GREASE, X25519MLKEM768, X25519, SECP256R1, 0x0018]),
        EC_POINT_FORMATS,
        SESSION_TICKET,
        Ext::Alpn,
        STATUS_REQUEST,
        // ecdsa_p256_sha256, rsa_pss_sha256, rsa_pkcs1_sha256, ecdsa_p384_sha384,
        // rsa_pss_sha384, rsa_pkcs1_sha384, rsa_pss_sha512, rsa_pkcs1_sha512
        Ext::Fixed(
            0x000d,
            &[0, 16, 4, 3, 8, 4, 4, 1, 5, 3, 8, 5, 5, 1, 8, 6, 6, 1],
        ),
        SCT,
        Ext::KeyShare(&[GREASE, X25519MLKEM768, X25519]),
        PSK_MODES_DHE,
        Ext::Versions(&[GREASE, 0x0304, 0x0303]),
        // compress_certificate: brotli
        Ext::Fixed(0x001b, &[2, 0, 2]),
        // application_settings (new code point) for h2
        Ext::Fixed(0x44cd, &[0, 3, 2, b'h', b'2']),
        Ext::EchGrease {
            aeads: &[1, 3],
            payload_lens: &[144, 176, 208, 240],
        },
        Ext::Grease { second: true },
    ],
    order: Order::ShuffleAllButGrease,
};

/// Firefox as Xray 26.7's `firefox` sends it (uTLS `HelloFirefox_Auto`).
pub const FIREFOX: Spec = Spec {
    name: "firefox",
    cipher_suites: &[
        0x1301, 0x1303, 0x1302, 0xc02b, 0xc02f, 0xcca9, 0xcca8, 0xc02c, 0xc030, 0xc00a, 0xc009,
        0xc013, 0xc014, 0x009c, 0x009d, 0x002f, 0x0035,
    ],
    extensions: &[
        Ext::ServerName,
        EXTENDED_MASTER_SECRET,
        RENEGOTIATION_INFO,
        Ext::Groups(&[
            X25519MLKEM768,
            X25519,
            SECP256R1,
            0x0018,
            0x0019,
            0x0100,
            0x0101,
        ]),
        EC_POINT_FORMATS,
        Ext::Alpn,
        STATUS_REQUEST,
        // delegated_credentials
        Ext::Fixed(0x0022, &[0, 8, 4, 3, 5, 3, 6, 3, 2, 3]),
        SCT,
        Ext::KeyShare(&[X25519MLKEM768, X25519, SECP256R1]),
        Ext::Versions(&[0x0304, 0x0303]),
        Ext::Fixed(
            0x000d,
            &[
                0, 22, 4, 3, 5, 3, 6, 3, 8, 4, 8, 5, 8, 6, 4, 1, 5, 1, 6, 1, 2, 3, 2, 1,
            ],
        ),
        // record_size_limit: 16385
        Ext::Fixed(0x001c, &[0x40, 0x01]),
        // compress_certificate: zlib, brotli, zstd
        Ext::Fixed(0x001b, &[6, 0, 1, 0, 2, 0, 3]),
        Ext::EchGrease {
            aeads: &[1, 3],
            payload_lens: &[239],
        },
    ],
    order: Order::AsListed,
};

/// Safari as Xray 26.7's `safari` sends it (uTLS `HelloSafari_Auto`).
pub const SAFARI: Spec = Spec {
    name: "safari",
    cipher_suites: &[
        GREASE, 0x1302, 0x1303, 0x1301, 0xc02c, 0xc02b, 0xcca9, 0xc030, 0xc02f, 0xcca8, 0xc00a,
        0xc009, 0xc014, 0xc013, 0x009d, 0x009c, 0x0035, 0x002f, 0xc008, 0xc012, 0x000a,
    ],
    extensions: &[
        Ext::Grease { second: false },
        Ext::ServerName,
        EXTENDED_MASTER_SECRET,
        RENEGOTIATION_INFO,
        Ext::Groups(&[GREASE, X25519MLKEM768, X25519, SECP256R1, 0x0018, 0x0019]),
        EC_POINT_FORMATS,
        Ext::Alpn,
        STATUS_REQUEST,
        Ext::Fixed(
            0x000d,
            &[
                0, 20, 4, 3, 8, 4, 4, 1, 5, 3, 8, 5, 8, 5, 5, 1, 8, 6, 6, 1, 2, 1,
            ],
        ),
        SCT,
        Ext::KeyShare(&[GREASE, X25519MLKEM768, X25519]),
        PSK_MODES_DHE,
        Ext::Versions(&[GREASE, 0x0304, 0x0303]),
        // compress_certificate: zlib
        Ext::Fixed(0x001b, &[2, 0, 1]),
        Ext::Grease { second: true },
    ],
    order: Order::AsListed,
};
