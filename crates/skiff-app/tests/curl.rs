//! curl (the real client) through the SOCKS5 inbound (socks5:// and socks5h://) and the HTTP
//! inbound (http:// forwarding, https:// through CONNECT) reaches local HTTP and HTTPS servers.

mod common;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;
use skiff_core::Network;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const BODY: &str = "hello through skiff\n";

/// A tiny HTTP/1.1 origin: answers every request with BODY and closes.
async fn http_origin() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        for _ in 0..32 {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16384 {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&head).to_lowercase();
                // The proxy must never leak the client's proxy credentials upstream.
                let leaked = text.contains("proxy-authorization");
                let body = if leaked { "LEAKED\n" } else { BODY };
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(reply.as_bytes()).await;
                let _ = s.shutdown().await;
            });
        }
    });
    addr
}

/// `openssl s_server -www` on loopback: a real TLS server that curl must reach through CONNECT.
struct TlsOrigin {
    child: Child,
    port: u16,
    _dir: TempDir,
}

impl Drop for TlsOrigin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tls_origin() -> TlsOrigin {
    let dir = std::env::temp_dir().join(format!("skiff-curl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let status = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args(["-nodes", "-days", "1", "-subj", "/CN=localhost", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(Stdio::null())
        .status()
        .expect("openssl is installed (.ci/run installs it)");
    assert!(status.success());
    let port = free_port();
    let child = Command::new("openssl")
        .args(["s_server", "-quiet", "-www", "-accept"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("-cert")
        .arg(&cert)
        .arg("-key")
        .arg(&key)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait (bounded) until it accepts.
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    TlsOrigin {
        child,
        port,
        _dir: TempDir(dir),
    }
}

fn curl(args: &[&str]) -> String {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "20", "--noproxy", ""])
        .args(args)
        .env_remove("ALL_PROXY")
        .env_remove("http_proxy")
        .env_remove("https_proxy")
        .output()
        .expect("curl is installed (.ci/run installs it)");
    assert!(
        out.status.success(),
        "curl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

async fn curl_async(args: Vec<String>) -> String {
    tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        curl(&refs)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_through_socks_and_http_inbounds() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let origin = http_origin().await;
        let tls = tls_origin();
        let running = start(&format!(
            r#"{{ "inbounds": [
                   {{ "tag": "socks-in", "listen": "127.0.0.1", "port": {}, "protocol": "socks" }},
                   {{ "tag": "http-in", "listen": "127.0.0.1", "port": {}, "protocol": "http" }},
                   {{ "tag": "http-auth", "listen": "127.0.0.1", "port": {}, "protocol": "http",
                      "settings": {{ "accounts": [{{ "user": "ann", "pass": "s3cret" }}] }} }} ],
                 "outbounds": [{{ "protocol": "freedom" }}] }}"#,
            free_port(),
            free_port(),
            free_port()
        ))
        .await;
        let socks = running.address_of("socks-in", Network::Tcp).unwrap();
        let http = running.address_of("http-in", Network::Tcp).unwrap();
        let http_auth = running.address_of("http-auth", Network::Tcp).unwrap();
        let plain = format!("http://127.0.0.1:{}/index.html", origin.port());
        let by_name = format!("http://localhost:{}/index.html", origin.port());
        let secure = format!("https://localhost:{}/", tls.port);

        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            curl_async(s(&["--proxy", &format!("socks5://{socks}"), &plain])).await,
            BODY
        );
        assert_eq!(
            curl_async(s(&["--proxy", &format!("socks5h://{socks}"), &by_name])).await,
            BODY
        );
        assert_eq!(
            curl_async(s(&["--proxy", &format!("http://{http}"), &plain])).await,
            BODY
        );
        assert_eq!(
            curl_async(s(&["--proxy", &format!("http://{http}"), &by_name])).await,
            BODY
        );
        assert_eq!(
            curl_async(s(&[
                "--proxy",
                &format!("http://ann:s3cret@{http_auth}"),
                &plain
            ]))
            .await,
            BODY
        );
        // Forwarded (non-CONNECT) requests are counted live like relayed ones.
        let forwarded = running
            .stats()
            .get("inbound>>>http-in>>>traffic>>>downlink")
            .unwrap_or(0);
        assert!(
            forwarded >= 2 * BODY.len() as u64,
            "http-in downlink counted {forwarded}"
        );
        let page = curl_async(s(&["-k", "--proxy", &format!("http://{http}"), &secure])).await;
        assert!(
            page.contains("s_server"),
            "HTTPS page through CONNECT: {page}"
        );
        let page = curl_async(s(&[
            "-k",
            "--proxy",
            &format!("socks5h://{socks}"),
            &secure,
        ]))
        .await;
        assert!(
            page.contains("s_server"),
            "HTTPS page through SOCKS5: {page}"
        );

        // Wrong credentials get a 407, not the page.
        let code = curl_async(s(&[
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--proxy",
            &format!("http://ann:wrong@{http_auth}"),
            &plain,
        ]))
        .await;
        assert_eq!(code, "407");
    })
    .await
    .expect("test deadline");
}
