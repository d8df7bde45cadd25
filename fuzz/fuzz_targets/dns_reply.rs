//! A DNS reply on any bytes, read against A and AAAA questions, under the transaction id the
//! bytes themselves carry so that parsing goes past the id check: hickory-proto's decoding
//! plus our checks (QR bit, question echo, CNAME chain from the asked name, sizes). Errors
//! are fine; panics and hangs are not.
#![no_main]
use skiff_dns::message::{Question, reply_id};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let id = reply_id(data).unwrap_or(0);
    for v6 in [false, true] {
        let question = Question::new("www.example.com", v6).expect("a valid name");
        let _ = question.decode(id, data);
    }
});
