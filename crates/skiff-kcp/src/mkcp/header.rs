//! Packet headers that make mKCP look like another UDP protocol (V2Ray `kcpSettings.header`).
//! The receiver only skips them (V2Ray checks nothing in them); the sender keeps the few
//! counters some of them carry, drawn at random once per connection:
//!
//! | type | bytes | content |
//! |---|---|---|
//! | none | 0 | |
//! | srtp | 4 | `B5 E8`, u16 number (random start, +1 before each packet) |
//! | utp | 4 | u16 connection id (random), `01 00` |
//! | wechat-video | 13 | `A1 08`, u32 number (random u16 start, +1 before each packet), `00 10 11 18 30 22 30` |
//! | dtls | 13 | `17 FE FD`, u16 epoch (random), `00 00`, u32 sequence (from 0), u16 length (from 17, +17 after each packet, −50 once above 100) |
//! | wireguard | 4 | `04 00 00 00` |

/// Which header, as configured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum HeaderKind {
    #[default]
    None,
    Srtp,
    Utp,
    WechatVideo,
    Dtls,
    Wireguard,
}

impl HeaderKind {
    /// V2Ray's names for `header.type`.
    pub const NAMES: [&str; 6] = ["none", "srtp", "utp", "wechat-video", "dtls", "wireguard"];

    pub fn parse(name: &str) -> Option<HeaderKind> {
        Some(match name {
            "none" | "" => HeaderKind::None,
            "srtp" => HeaderKind::Srtp,
            "utp" => HeaderKind::Utp,
            "wechat-video" => HeaderKind::WechatVideo,
            "dtls" => HeaderKind::Dtls,
            "wireguard" => HeaderKind::Wireguard,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            HeaderKind::None => "none",
            HeaderKind::Srtp => "srtp",
            HeaderKind::Utp => "utp",
            HeaderKind::WechatVideo => "wechat-video",
            HeaderKind::Dtls => "dtls",
            HeaderKind::Wireguard => "wireguard",
        }
    }

    pub fn size(self) -> usize {
        match self {
            HeaderKind::None => 0,
            HeaderKind::Srtp | HeaderKind::Utp | HeaderKind::Wireguard => 4,
            HeaderKind::WechatVideo | HeaderKind::Dtls => 13,
        }
    }
}

/// One connection's header writer.
#[derive(Clone, Debug)]
pub struct Header {
    kind: HeaderKind,
    /// srtp number, utp connection id, wechat number, or dtls epoch.
    a: u32,
    /// dtls sequence.
    seq: u32,
    /// dtls length.
    len: u16,
}

impl Header {
    /// A header writer whose random fields start from `random`.
    pub fn new(kind: HeaderKind, random: u16) -> Header {
        Header {
            kind,
            a: u32::from(random),
            seq: 0,
            len: 17,
        }
    }

    pub fn kind(&self) -> HeaderKind {
        self.kind
    }

    pub fn size(&self) -> usize {
        self.kind.size()
    }

    /// Appends the next packet's header to `out`.
    pub fn write(&mut self, out: &mut Vec<u8>) {
        match self.kind {
            HeaderKind::None => {}
            HeaderKind::Srtp => {
                self.a = (self.a + 1) & 0xffff;
                out.extend_from_slice(&[0xb5, 0xe8]);
                out.extend_from_slice(&(self.a as u16).to_be_bytes());
            }
            HeaderKind::Utp => {
                out.extend_from_slice(&(self.a as u16).to_be_bytes());
                out.extend_from_slice(&[1, 0]);
            }
            HeaderKind::WechatVideo => {
                self.a = self.a.wrapping_add(1);
                out.extend_from_slice(&[0xa1, 0x08]);
                out.extend_from_slice(&self.a.to_be_bytes());
                out.extend_from_slice(&[0x00, 0x10, 0x11, 0x18, 0x30, 0x22, 0x30]);
            }
            HeaderKind::Dtls => {
                out.extend_from_slice(&[23, 0xfe, 0xfd]);
                out.extend_from_slice(&(self.a as u16).to_be_bytes());
                out.extend_from_slice(&[0, 0]);
                out.extend_from_slice(&self.seq.to_be_bytes());
                out.extend_from_slice(&self.len.to_be_bytes());
                self.seq = self.seq.wrapping_add(1);
                self.len += 17;
                if self.len > 100 {
                    self.len -= 50;
                }
            }
            HeaderKind::Wireguard => out.extend_from_slice(&[4, 0, 0, 0]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two(kind: HeaderKind, random: u16) -> (Vec<u8>, Vec<u8>) {
        let mut h = Header::new(kind, random);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        h.write(&mut a);
        h.write(&mut b);
        assert_eq!(a.len(), kind.size());
        assert_eq!(b.len(), kind.size());
        (a, b)
    }

    #[test]
    fn headers_as_v2ray_writes_them() {
        // srtp as captured from v2ray 4.34: b5e8c9f0, b5e8c9f1, … (number starts at c9ef).
        assert_eq!(
            two(HeaderKind::Srtp, 0xc9ef),
            (vec![0xb5, 0xe8, 0xc9, 0xf0], vec![0xb5, 0xe8, 0xc9, 0xf1])
        );
        assert_eq!(two(HeaderKind::Srtp, 0xffff).0, [0xb5, 0xe8, 0, 0]);
        assert_eq!(
            two(HeaderKind::Utp, 0x1234),
            (vec![0x12, 0x34, 1, 0], vec![0x12, 0x34, 1, 0])
        );
        assert_eq!(
            two(HeaderKind::WechatVideo, 5).1,
            [0xa1, 8, 0, 0, 0, 7, 0, 0x10, 0x11, 0x18, 0x30, 0x22, 0x30]
        );
        assert_eq!(two(HeaderKind::Wireguard, 9).0, [4, 0, 0, 0]);
        let mut dtls = Header::new(HeaderKind::Dtls, 0xabcd);
        let lengths: Vec<u16> = (0..7)
            .map(|_| {
                let mut out = Vec::new();
                dtls.write(&mut out);
                assert_eq!(out[..7], [23, 0xfe, 0xfd, 0xab, 0xcd, 0, 0]);
                u16::from_be_bytes([out[11], out[12]])
            })
            .collect();
        assert_eq!(lengths, [17, 34, 51, 68, 85, 52, 69]);
    }

    #[test]
    fn names() {
        for name in HeaderKind::NAMES {
            assert_eq!(HeaderKind::parse(name).map(HeaderKind::name), Some(name));
        }
        assert_eq!(HeaderKind::parse("http"), None);
    }
}
