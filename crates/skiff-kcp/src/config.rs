use crate::KcpError;

/// kcptun's `--crypt` choices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Crypt {
    None,
    /// AES-256-CFB (kcptun's `aes`, the default).
    Aes,
    Aes128,
    Aes192,
    Salsa20,
    Xor,
    /// TEA with kcp-go's 16 rounds.
    Tea,
    Xtea,
    /// Blowfish with the full 32-byte derived key.
    Blowfish,
    /// Twofish-256.
    Twofish,
    /// SM4 with the first 16 derived key bytes.
    Sm4,
    /// CAST-128 with the first 16 derived key bytes.
    Cast5,
    /// Triple DES (EDE3) with the first 24 derived key bytes (kcptun's `3des`).
    TripleDes,
}

impl Crypt {
    /// Parses a kcptun `--crypt` name.
    pub fn parse(name: &str) -> Result<Crypt, KcpError> {
        match name {
            "none" => Ok(Crypt::None),
            "aes" => Ok(Crypt::Aes),
            "aes-128" => Ok(Crypt::Aes128),
            "aes-192" => Ok(Crypt::Aes192),
            "salsa20" => Ok(Crypt::Salsa20),
            "xor" => Ok(Crypt::Xor),
            "tea" => Ok(Crypt::Tea),
            "xtea" => Ok(Crypt::Xtea),
            "blowfish" => Ok(Crypt::Blowfish),
            "twofish" => Ok(Crypt::Twofish),
            "sm4" => Ok(Crypt::Sm4),
            "cast5" => Ok(Crypt::Cast5),
            "3des" => Ok(Crypt::TripleDes),
            // kcptun itself falls back to aes for unknown names; silently picking a cipher the
            // user did not name would only fail later as checksum errors, so say it now.
            other => Err(KcpError::UnknownCrypt(other.to_string())),
        }
    }
}

/// Everything one KCP session needs, in kcptun's vocabulary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KcpConfig {
    /// `--crypt`.
    pub crypt: Crypt,
    /// `--key`; the cipher key is PBKDF2-HMAC-SHA1(key, "kcp-go", 4096).
    pub key: String,
    /// `--nodelay`: 30 ms minimum RTO and gentler backoff.
    pub nodelay: bool,
    /// `--interval`: flush timer, clamped to 10..=5000 ms.
    pub interval_ms: u32,
    /// `--resend`: fast retransmit after this many skipping acks (0 = off).
    pub resend: u32,
    /// `--nc`: no congestion window.
    pub no_congestion: bool,
    /// `--sndwnd` in segments (0 keeps the library default 32).
    pub snd_wnd: u16,
    /// `--rcvwnd` in segments (0 keeps the library default 32).
    pub rcv_wnd: u16,
    /// `--mtu`: largest UDP payload, 50..=1500.
    pub mtu: usize,
    /// `--datashard` (FEC off if this or `parity_shards` is 0).
    pub data_shards: usize,
    /// `--parityshard`.
    pub parity_shards: usize,
    /// `--acknodelay`: send acks as soon as segments arrive.
    pub ack_nodelay: bool,
    /// Stream mode (kcptun always sets it): writes are merged into full segments.
    pub stream_mode: bool,
}

impl KcpConfig {
    /// kcptun's defaults for the client (`true`) or server side.
    pub fn kcptun_default(client: bool) -> KcpConfig {
        let (snd_wnd, rcv_wnd) = if client { (128, 512) } else { (1024, 1024) };
        KcpConfig {
            crypt: Crypt::Aes,
            key: "it's a secrect".to_string(),
            nodelay: false,
            interval_ms: 30,
            resend: 2,
            no_congestion: true,
            snd_wnd,
            rcv_wnd,
            mtu: 1350,
            data_shards: 10,
            parity_shards: 3,
            ack_nodelay: false,
            stream_mode: true,
        }
    }

    /// Applies a kcptun `--mode` preset.
    pub fn apply_mode(&mut self, mode: &str) -> Result<(), KcpError> {
        let (nodelay, interval, resend, nc) = match mode {
            "normal" => (false, 40, 2, true),
            "fast" => (false, 30, 2, true),
            "fast2" => (true, 20, 2, true),
            "fast3" => (true, 10, 2, true),
            "manual" => return Ok(()),
            other => return Err(KcpError::UnknownMode(other.to_string())),
        };
        self.nodelay = nodelay;
        self.interval_ms = interval;
        self.resend = resend;
        self.no_congestion = nc;
        Ok(())
    }
}
