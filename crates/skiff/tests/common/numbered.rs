//! Numbered datagrams for the UDP tunnel tests: each carries its number, some bytes and their
//! CRC-32, so a receiver can tell corrupted, lost, duplicated and reordered ones apart.

/// CRC-32 (IEEE), bit by bit: a few thousand short datagrams per test.
pub fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// Datagram `i`: its number, up to 999 bytes derived from it, their CRC-32.
pub fn datagram(i: u32) -> Vec<u8> {
    let len = (i as usize).wrapping_mul(37) % 1000;
    let mut d = i.to_be_bytes().to_vec();
    d.extend((0..len).map(|k| (k as u32).wrapping_mul(31).wrapping_add(i) as u8));
    let c = crc32(&d);
    d.extend_from_slice(&c.to_be_bytes());
    d
}

/// The number of an intact datagram; None for a corrupted one.
pub fn check(d: &[u8]) -> Option<u32> {
    if d.len() < 8 {
        return None;
    }
    let (body, c) = d.split_at(d.len() - 4);
    (crc32(body).to_be_bytes() == c).then(|| u32::from_be_bytes(body[..4].try_into().unwrap()))
}
