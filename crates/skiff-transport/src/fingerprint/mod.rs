//! Browser-shaped TLS ClientHellos: the fingerprints Xray's `fingerprint` setting names
//! (`chrome`, `firefox`, `safari`, `random`, `randomized`, and uTLS's other names mapped to
//! the nearest of these). REALITY needs its ClientHello to be one a browser would send; our
//! own TLS 1.3 client ([`crate::tls13_client`]) sends what [`hello::build`] makes.
//!
//! * [`specs`]: each browser's cipher suites, extensions and their order.
//! * [`hello`]: one ClientHello from a spec, with the per-connection parts (GREASE, shares,
//!   ECH GREASE, Chrome's shuffle).

pub mod hello;
pub mod specs;

pub use hello::{ClientHello, KeyShares, SESSION_ID_OFFSET, Variables, build};

/// A fingerprint by browser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fingerprint {
    Chrome,
    Firefox,
    Safari,
    /// uTLS's `randomized`: Chrome's extensions, with its cipher suites shuffled as well.
    Randomized,
}

impl Fingerprint {
    /// Xray's names. `random` picks one browser per call (Xray picks once per process).
    /// Names of browsers we do not model map to the nearest one, said in a log line; an
    /// unknown name is an error, as in Xray.
    pub fn from_xray_name(name: &str) -> Result<Fingerprint, String> {
        let lower = name.to_ascii_lowercase();
        let exact = match lower.as_str() {
            "" | "chrome" | "hellochrome_auto" | "hellochrome_133" | "hellochrome_131" => {
                Some(Fingerprint::Chrome)
            }
            "firefox" | "hellofirefox_auto" | "hellofirefox_148" | "hellofirefox_120" => {
                Some(Fingerprint::Firefox)
            }
            "safari" | "hellosafari_auto" | "hellosafari_26_3" => Some(Fingerprint::Safari),
            "randomized"
            | "randomizednoalpn"
            | "hellorandomized"
            | "hellorandomizedalpn"
            | "hellorandomizednoalpn" => Some(Fingerprint::Randomized),
            "random" => {
                let mut b = [0u8; 1];
                skiff_crypto::random::fill(&mut b);
                Some(
                    [
                        Fingerprint::Chrome,
                        Fingerprint::Firefox,
                        Fingerprint::Safari,
                    ][b[0] as usize % 3],
                )
            }
            _ => None,
        };
        if let Some(fp) = exact {
            return Ok(fp);
        }
        let nearest = if lower.contains("firefox") {
            Fingerprint::Firefox
        } else if lower.contains("safari") || lower.contains("ios") {
            Fingerprint::Safari
        } else if lower.contains("chrome")
            || lower.contains("edge")
            || lower.contains("360")
            || lower.contains("qq")
            || lower.contains("android")
            || lower.contains("golang")
            || lower == "unsafe"
        {
            Fingerprint::Chrome
        } else {
            return Err(format!("unknown TLS fingerprint {name:?}"));
        };
        tracing::info!(
            "TLS fingerprint {name:?} is sent as {} (the nearest one Skiff models)",
            nearest.spec().name
        );
        Ok(nearest)
    }

    pub fn spec(self) -> &'static specs::Spec {
        match self {
            Fingerprint::Chrome | Fingerprint::Randomized => &specs::CHROME,
            Fingerprint::Firefox => &specs::FIREFOX,
            Fingerprint::Safari => &specs::SAFARI,
        }
    }

    /// A ClientHello of this browser.
    pub fn client_hello(
        self,
        server_name: Option<&str>,
        alpn: &[String],
        session_id: [u8; 32],
    ) -> Option<ClientHello> {
        build(
            self.spec(),
            &Variables {
                server_name,
                alpn,
                session_id,
                shuffle_ciphers: self == Fingerprint::Randomized,
            },
        )
    }
}

/// The ALPN a browser offers when the config names none (what Xray's REALITY client sends).
pub fn browser_alpn() -> Vec<String> {
    vec!["h2".into(), "http/1.1".into()]
}
