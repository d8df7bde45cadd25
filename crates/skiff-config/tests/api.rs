//! The public API: multi-file merging through `load_sources` / `load_paths`, diagnostics
//! format, unknown-key warnings.

use std::path::PathBuf;

use skiff_config::{OutboundProtocol, Severity, Source, load_paths, load_sources};

fn src(name: &str, text: &str) -> Source {
    Source {
        name: name.into(),
        text: text.into(),
    }
}

#[test]
fn unknown_keys_warn_with_the_full_path() {
    let text = r#"{
  "inbounds": [
    {
      "port": 1080,
      "protocol": "socks",
      "settings": { "udpp": true }
    }
  ]
}"#;
    let loaded = load_sources(&[src("c.json", text)]).expect("unknown keys are not errors");
    assert_eq!(loaded.warnings.len(), 1);
    let w = &loaded.warnings[0];
    assert_eq!(w.severity, Severity::Warning);
    assert_eq!(w.path, "inbounds[0].settings.udpp");
    assert_eq!((w.line, w.column), (6, 29));
    assert_eq!(
        w.to_string(),
        "warning: c.json:6:29: inbounds[0].settings.udpp: unknown key `udpp` is ignored"
    );
}

#[test]
fn diagnostics_keep_their_own_file_after_merging() {
    let base = src(
        "base.json",
        r#"{"outbounds": [{"tag": "direct", "protocol": "freedom"}],
"routing": {"rules": [{"port": 1, "outboundTag": "direct"}]}}"#,
    );
    let extra = src(
        "extra.json",
        r#"{
  "outbounds": [
    {"tag": "proxy", "protocol": "freedom", "proxySettings": {"tag": "nowhere"}}
  ]
}"#,
    );
    let diags = load_sources(&[base, extra]).unwrap_err();
    assert_eq!(diags.len(), 1);
    assert_eq!(
        (
            diags[0].file.as_str(),
            diags[0].path.as_str(),
            diags[0].line
        ),
        ("extra.json", "outbounds[0].proxySettings.tag", 3)
    );
}

#[test]
fn merged_outbounds_prepend_and_routing_is_replaced() {
    let a = src(
        "a.json",
        r#"{"outbounds": [{"tag": "direct", "protocol": "freedom"}],
        "routing": {"rules": [{"port": 25, "outboundTag": "nowhere"}]}}"#,
    );
    let b = src(
        "b.json",
        r#"{"outbounds": [{"tag": "block", "protocol": "blackhole"}],
        "routing": {"rules": [{"port": 25, "outboundTag": "block"}]}}"#,
    );
    let loaded = load_sources(&[a, b]).expect("b's routing replaces a's broken one");
    let tags: Vec<&str> = loaded
        .plan
        .outbounds
        .iter()
        .map(|o| o.tag.as_str())
        .collect();
    assert_eq!(tags, ["block", "direct"]);
    assert!(matches!(
        loaded.plan.outbounds[0].protocol,
        OutboundProtocol::Blackhole(_)
    ));
    assert_eq!(loaded.plan.routing.rules.len(), 1);
}

#[test]
fn a_syntax_error_in_one_file_skips_cross_file_checks() {
    let good = src(
        "good.json",
        r#"{"routing": {"rules": [{"port": 1, "outboundTag": "proxy"}]}}"#,
    );
    let bad = src("bad.json", "{\"outbounds\": [{\"tag\": \"proxy\",}]}");
    let diags = load_sources(&[good, bad]).unwrap_err();
    assert_eq!(diags.len(), 1, "{diags:#?}");
    assert_eq!(diags[0].file, "bad.json");
    assert_eq!(diags[0].path, "");
}

#[test]
fn empty_input_is_an_error() {
    assert!(load_sources(&[]).is_err());
    assert!(load_paths(&[], None).is_err());
}

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("skiff-config-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn load_paths_reads_files_then_confdir_sorted() {
    let tmp = TempDir::new("confdir");
    let dir = tmp.0.join("conf.d");
    std::fs::create_dir_all(&dir).unwrap();
    let main = tmp.0.join("main.json");
    std::fs::write(&main, r#"{"outbounds": [{"tag": "direct", "protocol": "freedom"}], "log": {"loglevel": "error"}}"#).unwrap();
    // 02 is read after 01 and prepends its outbound; 99_tail appends; notes.txt is ignored.
    std::fs::write(
        dir.join("02_b.json"),
        r#"{"outbounds": [{"tag": "b", "protocol": "blackhole"}]}"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("01_a.json"),
        r#"{"outbounds": [{"tag": "a", "protocol": "freedom"}], "log": {"loglevel": "debug"}}"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("99_tail.jsonc"),
        "// comment\n{\"outbounds\": [{\"tag\": \"z\", \"protocol\": \"freedom\"}]}",
    )
    .unwrap();
    std::fs::write(dir.join("notes.txt"), "not json").unwrap();
    let loaded = load_paths(&[main], Some(&dir)).expect("loads");
    let tags: Vec<&str> = loaded
        .plan
        .outbounds
        .iter()
        .map(|o| o.tag.as_str())
        .collect();
    assert_eq!(tags, ["b", "a", "direct", "z"]);
    assert_eq!(
        loaded.plan.log.level,
        skiff_config::LogLevel::Debug,
        "confdir comes after -c files"
    );
}

#[test]
fn unreadable_files_are_diagnostics_with_an_empty_path() {
    let tmp = TempDir::new("unreadable");
    let missing = tmp.0.join("missing.json");
    let diags = load_paths(std::slice::from_ref(&missing), None).unwrap_err();
    assert_eq!(diags.len(), 1);
    assert_eq!(diags[0].path, "");
    assert_eq!(diags[0].file, missing.display().to_string());
    assert!(
        diags[0]
            .to_string()
            .starts_with(&format!("error: {}: cannot read", missing.display()))
    );
    let binary = tmp.0.join("binary.json");
    std::fs::write(&binary, [0xff, 0xfe, 0x00]).unwrap();
    let diags = load_paths(&[binary], None).unwrap_err();
    assert!(diags[0].message.contains("UTF-8"));
    let diags = load_paths(&[], Some(&tmp.0.join("no-such-dir"))).unwrap_err();
    assert!(diags[0].message.contains("cannot read directory"));
}

/// A file that is not UTF-8 says where: the byte offset (for a hex editor) and the line and
/// column (for a text editor), counted in characters before the bad byte.
#[test]
fn non_utf8_files_say_where() {
    let tmp = TempDir::new("latin1");
    let file = tmp.0.join("latin1.json");
    // "é" in Latin-1 (0xE9) after "ü" in UTF-8 (two bytes, one column) on line 3.
    std::fs::write(
        &file,
        b"{\n  \"log\": {\n    \"access\": \"\xc3\xbc\xe9\"\n  }\n}\n",
    )
    .unwrap();
    let diags = load_paths(std::slice::from_ref(&file), None).unwrap_err();
    assert_eq!(diags.len(), 1, "{diags:?}");
    let d = &diags[0];
    assert_eq!((d.path.as_str(), d.line, d.column), ("", 3, 17));
    assert!(
        d.to_string().starts_with(&format!(
            "error: {}:3:17: the file is not valid UTF-8 at byte offset 30 (byte 0xE9)",
            file.display()
        )),
        "{d}"
    );
    // Cut inside a multi-byte character at the very end.
    std::fs::write(&file, b"{}\n\xc3").unwrap();
    let d = &load_paths(std::slice::from_ref(&file), None).unwrap_err()[0];
    assert_eq!((d.line, d.column), (2, 1));
    assert!(d.message.contains("byte offset 3 (byte 0xC3)"), "{d}");
}
