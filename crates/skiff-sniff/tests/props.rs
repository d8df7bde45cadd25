//! Property tests: every sniffer takes any bytes without panicking, and finds the name it
//! was given however the client's bytes are cut (TCP prefixes, QUIC CRYPTO pieces).

use proptest::prelude::*;
use skiff_sniff::quic::test_support::{crypto_frame, initial_packet};
use skiff_sniff::tls::test_support::{client_hello_message, client_hello_record};
use skiff_sniff::{Protocol, Sniff, http, quic, sniff_any, tls};

fn found(s: Sniff) -> Option<String> {
    match s {
        Sniff::Found(f) => Some(f.domain),
        _ => None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..3000)) {
        let _ = sniff_any(&bytes, &[Protocol::Http, Protocol::Tls, Protocol::Quic]);
    }

    /// A long header with a real version in front of random bytes: exercises the packet walk.
    #[test]
    fn random_long_headers_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..1500)) {
        let mut bytes = vec![0xc0, 0, 0, 0, 1];
        bytes.extend_from_slice(&tail);
        let _ = quic::sniff_quic(&bytes);
    }

    #[test]
    fn tls_and_http_name_their_host_once_complete(name in "[a-z0-9]{1,20}(\\.[a-z]{2,8}){1,3}") {
        let record = client_hello_record(Some(&name));
        prop_assert_eq!(found(tls::sniff_tls(&record)), Some(name.clone()));
        prop_assert_eq!(tls::sniff_tls(&record[..record.len() - 1]), Sniff::NeedMore);
        let request = format!("GET / HTTP/1.1\r\nHost: {name}\r\nAccept: */*\r\n\r\n");
        prop_assert_eq!(found(http::sniff_http(request.as_bytes())), Some(name));
    }

    /// The ClientHello cut into pieces, each in its own Initial packet, in any order: found
    /// once every piece has arrived, "need more" before.
    #[test]
    fn quic_reassembles_any_split(
        name in "[a-z]{1,30}\\.example",
        cuts in proptest::collection::btree_set(1usize..60, 0..5),
        order in any::<prop::sample::Index>(),
    ) {
        let hello = client_hello_message(Some(&name));
        let mut bounds: Vec<usize> = cuts.into_iter().filter(|c| *c < hello.len()).collect();
        bounds.insert(0, 0);
        bounds.push(hello.len());
        let mut pieces: Vec<(usize, usize)> = bounds.windows(2).map(|w| (w[0], w[1])).collect();
        let rotate = order.index(pieces.len());
        pieces.rotate_left(rotate);
        let dcid = [9u8; 8];
        let packets: Vec<Vec<u8>> = pieces
            .iter()
            .enumerate()
            .map(|(i, (a, b))| initial_packet(1, &dcid, i as u16, &crypto_frame(*a as u64, &hello[*a..*b])))
            .collect();
        for n in 1..packets.len() {
            prop_assert_eq!(quic::sniff_quic(&packets[..n].concat()), Sniff::NeedMore);
        }
        prop_assert_eq!(found(quic::sniff_quic(&packets.concat())), Some(name));
    }
}
