//! `skiff x25519`: the key pair REALITY needs, printed as `xray x25519` prints it so guides
//! and panels that parse Xray's output work unchanged: the private key (clamped), the public
//! key under Xray's name for it ("Password"), and BLAKE3 of the public key ("Hash32").
//! Keys are base64 URL-safe without padding, or standard base64 with `--std-encoding`.

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use skiff_crypto::x25519;

/// The three lines Xray prints, or the message it prints for a key of the wrong size.
pub fn report(input: Option<&str>, std_encoding: bool) -> Result<String, String> {
    let engine = if std_encoding {
        &STANDARD
    } else {
        &URL_SAFE_NO_PAD
    };
    let private = match input {
        None => x25519::generate_private(),
        Some(text) => {
            let bytes = engine.decode(text.trim()).unwrap_or_default();
            let key: [u8; x25519::KEY_LEN] = bytes
                .try_into()
                .map_err(|_| "Invalid length of X25519 private key.".to_string())?;
            x25519::clamp(key)
        }
    };
    let public = x25519::public_key(&private);
    let hash = skiff_crypto::hash::blake3(&[&public]);
    Ok(format!(
        "PrivateKey: {}\nPassword (PublicKey): {}\nHash32: {}\n",
        engine.encode(private),
        engine.encode(public),
        engine.encode(hash)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Printed by `xray x25519 -i aGSYystUbf59_9_6LKRxD27rmSW_-2_nyd9YG_Gwbks` (Xray 26.7.28).
    #[test]
    fn matches_xray_for_a_given_key() {
        let out = report(Some("aGSYystUbf59_9_6LKRxD27rmSW_-2_nyd9YG_Gwbks"), false).unwrap();
        assert_eq!(
            out,
            "PrivateKey: aGSYystUbf59_9_6LKRxD27rmSW_-2_nyd9YG_Gwbks\n\
             Password (PublicKey): E59WjnvZcQMu7tR7_BgyhycuEdBS-CtKxfImRCdAvFM\n\
             Hash32: BuD3yNGtlyzWt_43L2yd9YOV4tuMM4BzuaFbIOOIDuY\n"
        );
    }

    #[test]
    fn wrong_length_or_encoding_is_refused_as_xray_words_it() {
        for bad in ["bad", "", "aGSYystUbf59_9_6LKRxD27rmSW_-2_nyd9YG_Gwbks+/="] {
            assert_eq!(
                report(Some(bad), false).unwrap_err(),
                "Invalid length of X25519 private key."
            );
        }
    }

    #[test]
    fn a_generated_key_round_trips() {
        let out = report(None, true).unwrap();
        let private = out
            .lines()
            .next()
            .unwrap()
            .strip_prefix("PrivateKey: ")
            .unwrap();
        assert_eq!(report(Some(private), true).unwrap(), out);
    }
}
