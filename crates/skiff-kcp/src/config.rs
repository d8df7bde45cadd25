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
            other => Err(KcpError::UnknownCrypt(other.to_string())),
        }
    }
}

/// Everything one KCP session needs, in kcptun's vocabulary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KcpConfig {
    pub crypt: Crypt,
    pub key: String,
    pub nodelay: bool,
    pub interval_ms: u32,
    pub resend: u32,
    pub no_congestion: bool,
    pub snd_wnd: u16,
    pub rcv_wnd: u16,
    pub mtu: usize,
    pub data_shards: usize,
    pub parity_shards: usize,
    pub ack_nodelay: bool,
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
