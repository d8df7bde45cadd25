//! A whole mKCP packet: `[header][sealed segments]`. [`PacketFormat`] is what both ends agree
//! on (shared by a listener's connections); [`PacketWriter`] adds one connection's header
//! counters.

use std::sync::Arc;

use super::header::{Header, HeaderKind};
use super::seal::Seal;

#[derive(Clone, Debug)]
pub struct PacketFormat {
    header: HeaderKind,
    seal: Arc<Seal>,
}

impl PacketFormat {
    pub fn new(header: HeaderKind, seed: Option<&str>) -> PacketFormat {
        PacketFormat {
            header,
            seal: Arc::new(Seal::new(seed)),
        }
    }

    /// Header and seal bytes around the segments.
    pub fn overhead(&self) -> usize {
        self.header.size() + self.seal.overhead()
    }

    /// The segments' bytes of a received packet (opened in place), or None when it is not
    /// an mKCP packet of this format.
    pub fn open<'a>(&self, datagram: &'a mut [u8]) -> Option<&'a [u8]> {
        let body = datagram.get_mut(self.header.size()..)?;
        if body.is_empty() {
            return None;
        }
        self.seal.open(body)
    }

    /// A writer for one connection, its random header fields starting from `random`.
    pub fn writer(&self, random: u16) -> PacketWriter {
        PacketWriter {
            header: Header::new(self.header, random),
            seal: self.seal.clone(),
        }
    }
}

#[derive(Debug)]
pub struct PacketWriter {
    header: Header,
    seal: Arc<Seal>,
}

impl PacketWriter {
    /// Replaces `out` with the packet carrying `segments`.
    pub fn write(&mut self, segments: &[u8], out: &mut Vec<u8>) {
        out.clear();
        self.header.write(out);
        let mut nonce = [0u8; 12];
        if matches!(*self.seal, Seal::Aes(_)) {
            skiff_crypto::random::fill(&mut nonce);
        }
        self.seal.seal(segments, nonce, out);
    }

    pub fn overhead(&self) -> usize {
        self.header.size() + self.seal.overhead()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn opens_a_v2ray_srtp_packet() {
        // v2ray 4.34, header srtp, no seed: a ping of conv 0xfea0.
        let mut packet = hex("b5e8ca0d342e2fe4343ed144373ed144373ed144373ed144375a");
        let format = PacketFormat::new(HeaderKind::Srtp, None);
        let plain = format.open(&mut packet).unwrap();
        let (seg, rest) = super::super::segment::Segment::parse(plain).unwrap();
        assert!(rest.is_empty());
        assert_eq!(seg.conv(), 0xfea0);
        assert!(
            PacketFormat::new(HeaderKind::Dtls, None)
                .open(&mut hex(
                    "b5e8ca0d342e2fe4343ed144373ed144373ed144373ed144375a"
                ))
                .is_none()
        );
    }

    #[test]
    fn every_format_round_trips() {
        for kind in HeaderKind::NAMES.map(|n| HeaderKind::parse(n).unwrap()) {
            for seed in [None, Some("k")] {
                let format = PacketFormat::new(kind, seed);
                let mut writer = format.writer(1);
                let mut out = Vec::new();
                writer.write(b"abcdefgh", &mut out);
                assert_eq!(out.len(), 8 + format.overhead());
                assert_eq!(format.open(&mut out).unwrap(), b"abcdefgh");
            }
        }
    }
}
