//! `skiff x25519` against `xray x25519` (Xray from XRAY_BIN or `../shared/peers/bin/xray`;
//! outside CI a missing one skips, under CI it fails): keys Xray generates, fed to Skiff with
//! `-i`, print exactly what Xray printed, in both encodings; and a key Skiff generates is
//! one Xray derives the same public key from.

mod common;

use std::path::Path;
use std::process::Command;

fn run(binary: &Path, args: &[&str]) -> String {
    let out = Command::new(binary).args(args).output().expect("run");
    assert!(out.status.success(), "{binary:?} {args:?}: {out:?}");
    String::from_utf8(out.stdout).expect("utf-8")
}

fn private_key_of(report: &str) -> String {
    report
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("PrivateKey: "))
        .unwrap_or_else(|| panic!("no PrivateKey line in {report:?}"))
        .to_string()
}

#[test]
fn skiff_prints_what_xray_prints() {
    let Some(xray) = common::shared_peer("xray", "XRAY_BIN") else {
        return;
    };
    let skiff = Path::new(env!("CARGO_BIN_EXE_skiff"));
    for encoding in [&[][..], &["--std-encoding"][..]] {
        for _ in 0..3 {
            let theirs = run(&xray, &[&["x25519"][..], encoding].concat());
            let key = private_key_of(&theirs);
            let ours = run(skiff, &[&["x25519", "-i", &key][..], encoding].concat());
            assert_eq!(ours, theirs, "xray generated {key}");

            let ours = run(skiff, &[&["x25519"][..], encoding].concat());
            let key = private_key_of(&ours);
            let theirs = run(&xray, &[&["x25519", "-i", &key][..], encoding].concat());
            assert_eq!(theirs, ours, "skiff generated {key}");
        }
    }
}
