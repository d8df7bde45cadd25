//! XTLS Vision (vless.md §7): padding frames, the inner-TLS filter, and the stream that leaves
//! the outer TLS one direction at a time.

pub mod filter;
pub mod frame;
pub mod stream;

pub use stream::{DIRECT_READS, DIRECT_WRITES, Side, VisionStream};

/// Fuzz entry point: the unpadder over arbitrary bytes in arbitrary pieces never panics and
/// never hands out more content than it consumed.
pub fn fuzz_unpad(data: &[u8]) {
    let Some((&chunk, rest)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(chunk).max(1);
    let uuid = [0x5a; 16];
    let mut input = uuid.to_vec();
    input.extend_from_slice(rest);
    let mut unpadder = frame::Unpadder::new(uuid);
    let mut filter = filter::TlsFilter::default();
    let mut held: Vec<u8> = Vec::new();
    let mut fed = 0;
    for _ in 0..100_000 {
        let at_end = fed == input.len();
        let step = unpadder.step(&held, 97, at_end);
        assert!(step.content.end <= step.consumed);
        assert!(step.consumed <= held.len());
        filter.observe(&held[step.content.clone()]);
        held.drain(..step.consumed);
        if step.finish.is_some() {
            return;
        }
        if step.consumed == 0 {
            if at_end {
                return;
            }
            let n = chunk.min(input.len() - fed);
            held.extend_from_slice(&input[fed..fed + n]);
            fed += n;
        }
    }
}
