//! Builds one ClientHello from a browser [`Spec`]: fresh random, GREASE values, key shares
//! and ECH GREASE per connection, Chrome's shuffle where the spec says so. Sans-IO: bytes out,
//! plus the private halves of the key shares for the handshake that follows.

use skiff_crypto::tls13::{MlKem768, P256Ephemeral};
use skiff_crypto::{random, x25519};

use super::specs::{Ext, GREASE, Order, SECP256R1, Spec, X25519, X25519MLKEM768};

/// Where the legacy session ID's 32 bytes start inside the handshake message (type 1 + u24
/// length + version 2 + random 32 + the session ID's length byte). REALITY writes its sealed
/// session ID there.
pub const SESSION_ID_OFFSET: usize = 39;
/// Where the random starts inside the handshake message.
pub const RANDOM_OFFSET: usize = 6;

/// The private halves of the shares a ClientHello offered.
#[derive(Default)]
pub struct KeyShares {
    /// The plain X25519 share's private key (REALITY's auth uses this one, as Xray does).
    pub x25519: Option<[u8; 32]>,
    /// The X25519 half of X25519MLKEM768 (Chrome sends a separate key there).
    pub hybrid_x25519: Option<[u8; 32]>,
    pub mlkem: Option<MlKem768>,
    pub p256: Option<P256Ephemeral>,
}

/// A ClientHello ready to send (after any session ID change) and what it needs later.
pub struct ClientHello {
    /// The handshake message (type, length, body): what the transcript hashes.
    pub message: Vec<u8>,
    pub shares: KeyShares,
}

impl ClientHello {
    pub fn random(&self) -> &[u8] {
        &self.message[RANDOM_OFFSET..RANDOM_OFFSET + 32]
    }

    pub fn session_id_mut(&mut self) -> &mut [u8] {
        &mut self.message[SESSION_ID_OFFSET..SESSION_ID_OFFSET + 32]
    }

    /// The message in one handshake record (every browser hello here is far below 16 KiB).
    pub fn to_record(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(5 + self.message.len());
        out.extend_from_slice(&[22, 3, 1]);
        out.extend_from_slice(&(self.message.len() as u16).to_be_bytes());
        out.extend_from_slice(&self.message);
        out
    }
}

/// What differs between two connections of one browser.
pub struct Variables<'a> {
    /// None for an IP literal or an empty name: no server_name extension.
    pub server_name: Option<&'a str>,
    pub alpn: &'a [String],
    pub session_id: [u8; 32],
    /// Chrome shuffles its extensions, `randomized` its cipher suites too.
    pub shuffle_ciphers: bool,
}

/// Per-connection GREASE values (RFC 8701), one per slot, as BoringSSL keeps them.
struct Grease {
    cipher: u16,
    group: u16,
    ext1: u16,
    ext2: u16,
    version: u16,
}

fn grease_value(seed: u8) -> u16 {
    let b = (seed & 0xf0) | 0x0a;
    u16::from_be_bytes([b, b])
}

impl Grease {
    fn fresh() -> Grease {
        let mut seed = [0u8; 5];
        random::fill(&mut seed);
        let ext1 = grease_value(seed[2]);
        let mut ext2 = grease_value(seed[3]);
        // Two extensions of one type are illegal: BoringSSL moves the second one on.
        if ext2 == ext1 {
            ext2 ^= 0x1010;
        }
        Grease {
            cipher: grease_value(seed[0]),
            group: grease_value(seed[1]),
            ext1,
            ext2,
            version: grease_value(seed[4]),
        }
    }
}

/// A uniformly random index below `n` (n > 0; the bias of a 32-bit modulus is negligible).
fn random_below(n: usize) -> usize {
    let mut b = [0u8; 4];
    random::fill(&mut b);
    u32::from_be_bytes(b) as usize % n
}

/// Fisher–Yates over the items `keep` says may move.
fn shuffle<T: Copy>(items: &mut [T], keep_in_place: impl Fn(&T) -> bool) {
    let movable: Vec<usize> = (0..items.len())
        .filter(|&i| !keep_in_place(&items[i]))
        .collect();
    for k in (1..movable.len()).rev() {
        let j = random_below(k + 1);
        items.swap(movable[k], movable[j]);
    }
}

fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// Writes `body` after a u16 length.
fn put_vec16(out: &mut Vec<u8>, body: &[u8]) {
    put_u16(out, body.len() as u16);
    out.extend_from_slice(body);
}

fn grease_list(values: &[u16], grease: u16) -> Vec<u8> {
    values
        .iter()
        .flat_map(|&v| if v == GREASE { grease } else { v }.to_be_bytes())
        .collect()
}

/// Builds a ClientHello for `spec`. `None` only when the system cannot make a key.
pub fn build(spec: &Spec, vars: &Variables<'_>) -> Option<ClientHello> {
    let grease = Grease::fresh();
    let mut shares = KeyShares::default();
    let mut ciphers: Vec<u16> = spec.cipher_suites.to_vec();
    if vars.shuffle_ciphers {
        shuffle(&mut ciphers, |&c| c == GREASE);
    }
    let mut extensions: Vec<Ext> = spec.extensions.to_vec();
    if spec.order == Order::ShuffleAllButGrease {
        shuffle(&mut extensions, |e| matches!(e, Ext::Grease { .. }));
    }

    let mut body = Vec::with_capacity(2048);
    put_u16(&mut body, 0x0303);
    let mut client_random = [0u8; 32];
    random::fill(&mut client_random);
    body.extend_from_slice(&client_random);
    body.push(32);
    body.extend_from_slice(&vars.session_id);
    put_vec16(&mut body, &grease_list(&ciphers, grease.cipher));
    body.extend_from_slice(&[1, 0]); // compression: null only

    let mut exts = Vec::with_capacity(2048);
    for ext in &extensions {
        let (ext_type, data) = match *ext {
            Ext::Grease { second } => {
                if second {
                    (grease.ext2, vec![0])
                } else {
                    (grease.ext1, vec![])
                }
            }
            Ext::ServerName => {
                let Some(name) = vars.server_name else {
                    continue;
                };
                let mut entry = vec![0u8];
                put_vec16(&mut entry, name.as_bytes());
                let mut data = Vec::new();
                put_vec16(&mut data, &entry);
                (0x0000, data)
            }
            Ext::Alpn => {
                if vars.alpn.is_empty() {
                    continue;
                }
                let mut list = Vec::new();
                for p in vars.alpn {
                    list.push(p.len() as u8);
                    list.extend_from_slice(p.as_bytes());
                }
                let mut data = Vec::new();
                put_vec16(&mut data, &list);
                (0x0010, data)
            }
            Ext::Groups(groups) => {
                let mut data = Vec::new();
                put_vec16(&mut data, &grease_list(groups, grease.group));
                (0x000a, data)
            }
            Ext::KeyShare(groups) => {
                let mut list = Vec::new();
                for &g in groups {
                    let share = match g {
                        GREASE => {
                            put_u16(&mut list, grease.group);
                            put_vec16(&mut list, &[0]);
                            continue;
                        }
                        X25519 => {
                            let private = x25519::generate_private();
                            shares.x25519 = Some(private);
                            x25519::public_key(&private).to_vec()
                        }
                        X25519MLKEM768 => {
                            let kem = MlKem768::generate()?;
                            let private = x25519::generate_private();
                            let mut share = kem.encapsulation_key().to_vec();
                            share.extend_from_slice(&x25519::public_key(&private));
                            shares.mlkem = Some(kem);
                            shares.hybrid_x25519 = Some(private);
                            share
                        }
                        SECP256R1 => {
                            let key = P256Ephemeral::generate()?;
                            let share = key.public_key().to_vec();
                            shares.p256 = Some(key);
                            share
                        }
                        _ => continue,
                    };
                    put_u16(&mut list, g);
                    put_vec16(&mut list, &share);
                }
                let mut data = Vec::new();
                put_vec16(&mut data, &list);
                (0x0033, data)
            }
            Ext::Versions(versions) => {
                let list = grease_list(versions, grease.version);
                let mut data = vec![list.len() as u8];
                data.extend_from_slice(&list);
                (0x002b, data)
            }
            Ext::EchGrease {
                aeads,
                payload_lens,
            } => {
                let payload_len = payload_lens[random_below(payload_lens.len())] as usize;
                let mut data = vec![0u8]; // outer ClientHello
                put_u16(&mut data, 0x0001); // HKDF-SHA256
                put_u16(&mut data, aeads[random_below(aeads.len())]);
                let mut config_id = [0u8; 1];
                random::fill(&mut config_id);
                data.push(config_id[0]);
                // `enc` looks like an X25519 public key, as a real one would.
                put_vec16(&mut data, &x25519::public_key(&x25519::generate_private()));
                let mut payload = vec![0u8; payload_len];
                random::fill(&mut payload);
                put_vec16(&mut data, &payload);
                (0xfe0d, data)
            }
            Ext::Fixed(t, bytes) => (t, bytes.to_vec()),
        };
        put_u16(&mut exts, ext_type);
        put_vec16(&mut exts, &data);
    }
    put_vec16(&mut body, &exts);

    let mut message = Vec::with_capacity(4 + body.len());
    message.push(1);
    message.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    message.extend_from_slice(&body);
    Some(ClientHello { message, shares })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fingerprint::Fingerprint;
    use crate::tls::{Peek, peek_client_hello};
    use proptest::prelude::*;

    fn peek(hello: &ClientHello) -> crate::tls::ClientHelloInfo {
        match peek_client_hello(&hello.to_record()) {
            Peek::ClientHello(info) => info,
            other => panic!("not a ClientHello: {other:?}"),
        }
    }

    #[test]
    fn chrome_keeps_grease_at_both_ends_and_shuffles_the_rest() {
        let mut orders = std::collections::HashSet::new();
        for _ in 0..20 {
            let hello = Fingerprint::Chrome
                .client_hello(Some("example.com"), &["h2".into()], [0; 32])
                .unwrap();
            let info = peek(&hello);
            let exts = &info.extensions;
            assert_eq!(exts.len(), 18);
            assert!(is_grease(exts[0]) && is_grease(exts[17]) && exts[0] != exts[17]);
            assert!(exts[1..17].iter().all(|e| !is_grease(*e)));
            orders.insert(exts[1..17].to_vec());
            assert!(hello.shares.x25519.is_some() && hello.shares.mlkem.is_some());
        }
        assert!(orders.len() > 1, "Chrome's extension order must vary");
    }

    fn is_grease(v: u16) -> bool {
        v & 0x0f0f == 0x0a0a && (v >> 8) == (v & 0xff)
    }

    #[test]
    fn firefox_order_is_fixed_and_has_a_p256_share() {
        let a = Fingerprint::Firefox
            .client_hello(None, &[], [0; 32])
            .unwrap();
        let b = Fingerprint::Firefox
            .client_hello(None, &[], [0; 32])
            .unwrap();
        assert_eq!(peek(&a).extensions, peek(&b).extensions);
        assert!(a.shares.p256.is_some());
        // No name, no ALPN: neither extension is sent.
        assert_eq!(peek(&a).sni, None);
        assert!(peek(&a).alpn.is_empty());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        /// Every fingerprint's hello reads back (through the sniffer's independent parser)
        /// with the name, protocols and session ID it was built with.
        #[test]
        fn hellos_read_back(
            name in "[a-z]{1,20}\\.[a-z]{2,5}",
            alpn in proptest::collection::vec("[a-z0-9/.]{1,12}", 0..3),
            session_id in any::<[u8; 32]>(),
            which in 0usize..4,
        ) {
            let fp = [Fingerprint::Chrome, Fingerprint::Firefox, Fingerprint::Safari, Fingerprint::Randomized][which];
            let mut hello = fp.client_hello(Some(&name), &alpn, session_id).unwrap();
            prop_assert_eq!(&hello.message[SESSION_ID_OFFSET..SESSION_ID_OFFSET + 32], &session_id[..]);
            let info = peek(&hello);
            prop_assert_eq!(info.sni.as_deref(), Some(name.as_str()));
            prop_assert_eq!(info.alpn, alpn);
            prop_assert!(info.supported_versions.contains(&0x0304));
            hello.session_id_mut().fill(0);
            prop_assert_eq!(&hello.message[SESSION_ID_OFFSET..SESSION_ID_OFFSET + 32], &[0u8; 32][..]);
        }
    }
}
