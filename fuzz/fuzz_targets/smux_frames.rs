//! smux session on any bytes, both versions, fed in arbitrary splits: never panics, and the
//! streams it accepts can be read, written and closed.
#![no_main]
use skiff_kcp::smux::{Session, SmuxConfig, StreamRead};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let mut config = SmuxConfig::kcptun(1 + (first & 1));
    config.max_receive_buffer = 1 + usize::from(first >> 1) * 64;
    let mut session = Session::new(config, first & 0x80 != 0, 0);
    let split = 1 + usize::from(first >> 3);
    let mut buf = [0u8; 97];
    let mut out = Vec::new();
    for (i, piece) in rest.chunks(split).enumerate() {
        if session.input(piece, i as u32).is_err() {
            break;
        }
        while let Some(sid) = session.accept() {
            let _ = session.write(sid, piece);
            if sid % 3 == 0 {
                session.shutdown(sid);
            }
        }
        for sid in 0..8 {
            while let StreamRead::Data(n) = session.read(sid, &mut buf) {
                if n == 0 {
                    break;
                }
            }
        }
        session.take_output(usize::from(first), &mut out);
        let _ = session.tick(i as u32 * 1000);
    }
    for sid in 0..8 {
        session.close(sid);
    }
    session.take_output(usize::MAX, &mut out);
});
