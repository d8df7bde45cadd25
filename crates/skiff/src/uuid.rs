//! `skiff uuid`: random v4 UUIDs, and Xray's mapping of arbitrary strings to UUIDs
//! (spec/vless.md §2.1): SHA-1 over 16 zero bytes and the string, first 16 bytes, version 5.

pub fn from_string(input: &str) -> [u8; 16] {
    let digest = skiff_crypto::hash::sha1(&[&[0u8; 16], input.as_bytes()]);
    let mut u = [0u8; 16];
    u.copy_from_slice(&digest[..16]);
    u[6] = (u[6] & 0x0f) | 0x50;
    u[8] = (u[8] & 0x3f) | 0x80;
    u
}

pub fn random() -> [u8; 16] {
    let mut u = [0u8; 16];
    skiff_crypto::random::fill(&mut u);
    u[6] = (u[6] & 0x0f) | 0x40;
    u[8] = (u[8] & 0x3f) | 0x80;
    u
}

pub fn format(u: &[u8; 16]) -> String {
    let hex: String = u.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_xray_vector() {
        // Test vector from spec/vless.md, checked against `xray uuid -i example`.
        assert_eq!(
            format(&from_string("example")),
            "feb54431-301b-52bb-a6dd-e1e93e81bb9e"
        );
    }

    #[test]
    fn random_is_version_4() {
        let u = random();
        assert_eq!(u[6] >> 4, 4);
        assert_ne!(u, random());
    }
}
