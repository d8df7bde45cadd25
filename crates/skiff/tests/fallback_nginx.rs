//! VLESS fallbacks end to end with Debian's nginx as the web server behind them (spec/vless.md
//! §6): the page through the TLS port is nginx's own, Xray's classic "default to nginx, /ws to
//! a WebSocket inbound" layout carries v2ray's WS+TLS client, SNI and ALPN pick the backend
//! (h2 to an h2c port), and PROXY protocol v1/v2 hand nginx the real client address.
//! `.ci/run` installs nginx, curl, openssl and v2ray; elsewhere a missing one skips with a note.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use sha2::{Digest, Sha256};

fn tls_stream(dir: &Path, alpn: &[&str]) -> String {
    let alpn = if alpn.is_empty() {
        String::new()
    } else {
        format!(r#""alpn": {:?},"#, alpn)
    };
    format!(
        r#"{{ "network": "tcp", "security": "tls",
              "tlsSettings": {{ {alpn} "certificates": [{{ "certificateFile": "{}", "keyFile": "{}" }}] }} }}"#,
        dir.join("cert.pem").display(),
        dir.join("key.pem").display()
    )
}

fn vless_inbound(port: u16, fallbacks: &str, stream: &str) -> String {
    format!(
        r#"{{ "listen": "127.0.0.1", "port": {port}, "protocol": "vless",
             "settings": {{ "clients": [{{ "id": "{UUID}" }}], "decryption": "none",
                            "fallbacks": {fallbacks} }},
             "streamSettings": {stream} }}"#
    )
}

fn skiff_config(inbounds: &[String]) -> String {
    format!(
        r#"{{ "log": {{ "loglevel": "debug" }},
             "inbounds": [{}],
             "outbounds": [{{ "protocol": "freedom" }}] }}"#,
        inbounds.join(",\n")
    )
}

/// Splits `curl -i` output into the status line, the headers (Date blanked) and the body.
fn parts(response: &[u8]) -> (String, String, Vec<u8>) {
    let undated = undated(response);
    let split = find(&undated, b"\r\n\r\n").expect("a complete HTTP response") + 4;
    let head = String::from_utf8_lossy(&undated[..split]).into_owned();
    let status = head.lines().next().unwrap_or_default().to_string();
    (status, head, undated[split..].to_vec())
}

fn curl_ok(args: &[&str]) -> Vec<u8> {
    let out = curl(args);
    assert!(
        out.status.success(),
        "curl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// (a) The TLS port answers a browser exactly as nginx does.
#[test]
fn curl_through_the_tls_port_gets_nginx_s_page() {
    let Some(nginx) = nginx_binary() else { return };
    let dir = TempDir::new("fb-page");
    certificate(dir.path());
    site(dir.path(), "a", "site A");
    let (web, vless) = (free_port(), free_port());
    let root = dir.path().join("www-a");
    let _nginx = start_nginx(
        &nginx,
        dir.path(),
        &format!(
            "server {{ listen 127.0.0.1:{web}; root {}; }}",
            root.display()
        ),
        &[web],
    );
    let config = skiff_config(&[vless_inbound(
        vless,
        &format!(r#"[{{ "dest": {web} }}]"#),
        &tls_stream(dir.path(), &["http/1.1"]),
    )]);
    let (mut skiff, log) = start_skiff(dir.path(), "skiff", &config, &[vless]);

    let direct = curl_ok(&["-i", &format!("http://127.0.0.1:{web}/index.html")]);
    let through = curl_ok(&["-k", "-i", &format!("https://127.0.0.1:{vless}/index.html")]);
    let (direct, through) = (parts(&direct), parts(&through));
    assert_eq!(through.0, "HTTP/1.1 200 OK");
    assert!(String::from_utf8_lossy(&through.2).contains("site A"));
    assert_eq!(
        through, direct,
        "status line, headers (Date aside) and body"
    );
    // A missing page is nginx's 404 page too.
    let direct = curl_ok(&["-i", &format!("http://127.0.0.1:{web}/missing")]);
    let through = curl_ok(&["-k", "-i", &format!("https://127.0.0.1:{vless}/missing")]);
    assert_eq!(parts(&through), parts(&direct));
    assert!(parts(&through).0.contains("404"));
    assert_healthy(&mut skiff, &log);
}

/// (c) SNI `name` and negotiated ALPN choose between nginx backends, as Xray's table does:
/// a name's own default beats the default name's `h2` entry; `h2` goes to an h2c port.
#[test]
fn name_and_alpn_pick_the_backend() {
    let Some(nginx) = nginx_binary() else { return };
    let dir = TempDir::new("fb-select");
    certificate(dir.path());
    let ports: Vec<u16> = (0..5).map(|_| free_port()).collect();
    let [a, b, c, d, vless] = ports[..] else {
        unreachable!()
    };
    let mut servers = String::new();
    for (name, port, h2) in [
        ("a", a, ""),
        ("b", b, ""),
        ("c", c, " http2"),
        ("d", d, " http2"),
    ] {
        let root = site(dir.path(), name, &format!("site {}", name.to_uppercase()));
        servers.push_str(&format!(
            "server {{ listen 127.0.0.1:{port}{h2}; root {}; }}\n",
            root.display()
        ));
    }
    let _nginx = start_nginx(&nginx, dir.path(), &servers, &[a, b, c, d]);
    let fallbacks = format!(
        r#"[ {{ "dest": {a} }},
             {{ "name": "b.example", "dest": {b} }},
             {{ "alpn": "h2", "dest": {c} }},
             {{ "name": "d.example", "alpn": "h2", "dest": {d} }},
             {{ "name": "d.example", "dest": {b} }} ]"#
    );
    let config = skiff_config(&[vless_inbound(
        vless,
        &fallbacks,
        &tls_stream(dir.path(), &["h2", "http/1.1"]),
    )]);
    let (mut skiff, log) = start_skiff(dir.path(), "skiff", &config, &[vless]);

    let fetch = |host: &str, http: &str| -> (String, String) {
        let resolve = format!("{host}:{vless}:127.0.0.1");
        let url = format!("https://{host}:{vless}/index.html");
        let mut args = vec!["-k", http, "-w", "\n%{http_version}", &url];
        if host != "127.0.0.1" {
            args.extend(["--resolve", &resolve]);
        }
        let out = String::from_utf8_lossy(&curl_ok(&args)).into_owned();
        let (body, version) = out.rsplit_once('\n').unwrap();
        let title = body
            .split_once("<title>")
            .and_then(|(_, t)| t.split_once("</title>"))
            .map(|(t, _)| t.to_string())
            .unwrap_or_else(|| format!("no page: {body:?}"));
        (title, version.to_string())
    };
    let want = |title: &str, version: &str| (title.to_string(), version.to_string());
    // No SNI (an IP address), HTTP/1.1: the default.
    assert_eq!(fetch("127.0.0.1", "--http1.1"), want("site A", "1.1"));
    // ALPN h2 without a matching name: the h2c backend, spoken to with the decrypted h2.
    assert_eq!(fetch("127.0.0.1", "--http2"), want("site C", "2"));
    // Exact name; a longer SNI containing a configured name; an unknown name.
    assert_eq!(fetch("b.example", "--http1.1"), want("site B", "1.1"));
    assert_eq!(fetch("www.b.example", "--http1.1"), want("site B", "1.1"));
    assert_eq!(fetch("c.example", "--http1.1"), want("site A", "1.1"));
    assert_eq!(fetch("c.example", "--http2"), want("site C", "2"));
    // A name with its own h2 entry, and its own default for other ALPNs.
    assert_eq!(fetch("d.example", "--http2"), want("site D", "2"));
    assert_eq!(fetch("d.example", "--http1.1"), want("site B", "1.1"));
    assert_healthy(&mut skiff, &log);
}

/// (d) `xver` 1 and 2: nginx (`listen … proxy_protocol`) logs the curl client's own address
/// and port, not Skiff's.
#[test]
fn xver_1_and_2_give_nginx_the_client_address() {
    let Some(nginx) = nginx_binary() else { return };
    let dir = TempDir::new("fb-xver");
    certificate(dir.path());
    let root = site(dir.path(), "a", "site A");
    let ports: Vec<u16> = (0..4).map(|_| free_port()).collect();
    let [pp1, pp2, v1, v2] = ports[..] else {
        unreachable!()
    };
    let d = dir.path().display();
    let servers = format!(
        "server {{ listen 127.0.0.1:{pp1} proxy_protocol; root {r}; access_log {d}/logs/pp1.log real; }}\n\
         server {{ listen 127.0.0.1:{pp2} proxy_protocol; root {r}; access_log {d}/logs/pp2.log real; }}\n",
        r = root.display()
    );
    let _nginx = start_nginx(&nginx, dir.path(), &servers, &[pp1, pp2]);
    let stream = tls_stream(dir.path(), &["http/1.1"]);
    let config = skiff_config(&[
        vless_inbound(v1, &format!(r#"[{{ "dest": {pp1}, "xver": 1 }}]"#), &stream),
        vless_inbound(
            v2,
            &format!(r#"[{{ "dest": "127.0.0.1:{pp2}", "xver": 2 }}]"#),
            &stream,
        ),
    ]);
    let (mut skiff, log) = start_skiff(dir.path(), "skiff", &config, &[v1, v2]);

    for (port, access) in [(v1, "pp1.log"), (v2, "pp2.log")] {
        let url = format!("https://127.0.0.1:{port}/index.html?xver");
        let out = curl_ok(&["-k", "-o", "/dev/null", "-w", "%{local_port}", &url]);
        let client_port = String::from_utf8_lossy(&out).trim().to_string();
        assert!(
            client_port.parse::<u16>().is_ok(),
            "curl said {client_port:?}"
        );
        let want = format!("127.0.0.1:{client_port} \"GET /index.html?xver HTTP/1.1\"");
        // nginx logs when the request is finalized, possibly just after curl returned.
        let path = dir.path().join("logs").join(access);
        let deadline = Instant::now() + READ_TIMEOUT;
        loop {
            let logged = std::fs::read_to_string(&path).unwrap_or_default();
            if logged.lines().any(|l| l == want) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{access}: want {want:?}, have {logged:?}"
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }
    assert_healthy(&mut skiff, &log);
}

// ---- (b) Xray's classic layout with v2ray's WS+TLS client ----

const BULK: u64 = 4 << 20;

fn payload_chunks(seed: u64, len: u64, mut f: impl FnMut(&[u8])) {
    let mut left = len;
    let mut seed = seed;
    while left > 0 {
        let n = left.min(64 * 1024);
        f(&noise(seed, n as usize));
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        left -= n;
    }
}

fn digest(seed: u64, len: u64) -> Vec<u8> {
    let mut h = Sha256::new();
    payload_chunks(seed, len, |c| h.update(c));
    h.finalize().to_vec()
}

/// Sends `seed`'s payload while hashing what arrives; the FIN waits until the whole opposite
/// payload arrived (v2ray 4.34 drops queued data otherwise; see interop_v2ray.rs).
fn bulk_exchange(s: TcpStream, seed: u64) -> (u64, Vec<u8>) {
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut writer = s.try_clone().unwrap();
    let (all_received, wait_all_received) = std::sync::mpsc::channel::<()>();
    let sender = std::thread::spawn(move || {
        payload_chunks(seed, BULK, |c| writer.write_all(c).unwrap());
        let _ = wait_all_received.recv_timeout(Duration::from_secs(60));
        writer.shutdown(std::net::Shutdown::Write).unwrap();
    });
    let mut reader = s;
    let mut h = Sha256::new();
    let mut total = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = reader.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        total += n as u64;
        h.update(&buf[..n]);
        if total >= BULK {
            let _ = all_received.send(());
        }
    }
    drop(all_received);
    sender.join().unwrap();
    (total, h.finalize().to_vec())
}

/// (b) One VLESS+TLS port with `fallbacks: [{dest: nginx}, {path: "/ws", dest: <VLESS over
/// WebSocket inbound>}]`: v2ray's WS+TLS client reaches its target through the path fallback,
/// while a browser on the same port still gets nginx.
#[test]
fn v2ray_ws_tls_client_through_the_path_fallback() {
    let Some(nginx) = nginx_binary() else { return };
    let Some(v2ray) = tool("v2ray", &["/usr/bin/v2ray", "/usr/local/bin/v2ray"]) else {
        return;
    };
    let dir = TempDir::new("fb-ws");
    certificate(dir.path());
    let root = site(dir.path(), "a", "site A");
    let ports: Vec<u16> = (0..4).map(|_| free_port()).collect();
    let [web, tls_port, ws_port, client_port] = ports[..] else {
        unreachable!()
    };
    let _nginx = start_nginx(
        &nginx,
        dir.path(),
        &format!(
            "server {{ listen 127.0.0.1:{web}; root {}; }}",
            root.display()
        ),
        &[web],
    );
    let ws_inbound = format!(
        r#"{{ "listen": "127.0.0.1", "port": {ws_port}, "protocol": "vless",
             "settings": {{ "clients": [{{ "id": "{UUID}" }}], "decryption": "none" }},
             "streamSettings": {{ "network": "ws", "wsSettings": {{ "path": "/ws" }} }} }}"#
    );
    let config = skiff_config(&[
        vless_inbound(
            tls_port,
            &format!(r#"[{{ "dest": {web} }}, {{ "path": "/ws", "dest": {ws_port} }}]"#),
            &tls_stream(dir.path(), &["http/1.1"]),
        ),
        ws_inbound,
    ]);
    let (mut skiff, log) = start_skiff(dir.path(), "skiff", &config, &[tls_port, ws_port]);

    let sink = TcpListener::bind("127.0.0.1:0").unwrap();
    let target = sink.local_addr().unwrap().port();
    let client = format!(
        r#"{{ "log": {{ "loglevel": "warning" }},
  "inbounds": [{{ "listen": "127.0.0.1", "port": {client_port}, "protocol": "dokodemo-door",
                 "settings": {{ "address": "127.0.0.1", "port": {target}, "network": "tcp" }} }}],
  "outbounds": [{{ "protocol": "vless",
                  "settings": {{ "vnext": [{{ "address": "127.0.0.1", "port": {tls_port},
                                              "users": [{{ "id": "{UUID}", "encryption": "none" }}] }}] }},
                  "streamSettings": {{ "network": "ws", "wsSettings": {{ "path": "/ws" }},
                                      "security": "tls",
                                      "tlsSettings": {{ "serverName": "localhost", "allowInsecure": true }} }} }}] }}"#
    );
    let client_json = dir.path().join("v2ray.json");
    std::fs::write(&client_json, client).unwrap();
    let v2ray_log = dir.path().join("v2ray.log");
    let child = Command::new(&v2ray)
        .arg("-config")
        .arg(&client_json)
        .env("V2RAY_LOCATION_ASSET", dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&v2ray_log).unwrap())
        .spawn()
        .unwrap();
    let mut v2ray_proc = Proc {
        child,
        what: "v2ray",
    };
    wait_ports(&mut v2ray_proc, &[client_port], &v2ray_log);

    let far_end = std::thread::spawn(move || {
        let (s, _) = sink.accept().unwrap();
        bulk_exchange(s, 2)
    });
    let near = TcpStream::connect(("127.0.0.1", client_port)).unwrap();
    let (down_len, down_digest) = bulk_exchange(near, 1);
    let (up_len, up_digest) = far_end.join().unwrap();
    assert_eq!((up_len, down_len), (BULK, BULK), "lengths");
    assert_eq!(up_digest, digest(1, BULK), "uplink SHA-256");
    assert_eq!(down_digest, digest(2, BULK), "downlink SHA-256");

    // The same port still serves the website to everything else.
    let page = curl_ok(&["-k", "--http1.1", &format!("https://127.0.0.1:{tls_port}/")]);
    assert!(String::from_utf8_lossy(&page).contains("site A"));
    assert_healthy(&mut skiff, &log);
}
