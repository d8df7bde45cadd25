//! A link as a QR code in the terminal: two modules per character cell (upper and lower half
//! blocks), drawn light-on-dark as `qrencode -t UTF8` does, since most terminals are dark:
//! the light modules and the quiet zone are the blocks.

use qrcode::render::unicode::Dense1x2;
use qrcode::{EcLevel, QrCode};

pub fn terminal_qr(text: &str) -> Result<String, String> {
    // Level M, as phone apps' own share screens use: survives a smudge, stays small.
    let code = QrCode::with_error_correction_level(text.as_bytes(), EcLevel::M)
        .map_err(|e| format!("the link does not fit in a QR code: {e}"))?;
    Ok(code
        .render::<Dense1x2>()
        .dark_color(Dense1x2::Light)
        .light_color(Dense1x2::Dark)
        .quiet_zone(true)
        .build())
}
