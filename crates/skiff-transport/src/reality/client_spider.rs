//! What a REALITY client does when the server did not prove it is REALITY's (Xray's
//! `UClient` after `!uConn.Verified`): the connection is a real TLS session with the real
//! site, so it behaves like a browser there — GET `spiderX` with a padding cookie, follow a
//! few of the page's links — in the background, waits the `spiderY` "return" interval, and
//! the outbound fails. An observer sees a browser visiting the site, not a proxy erroring out.
//!
//! Bounded: at most [`MAX_FOLLOW_UPS`] more requests, [`MAX_BODY`] bytes read per response,
//! [`CRAWL_BUDGET`] for the whole crawl.

use std::time::Duration;

use bytes::Bytes;
use skiff_core::BoxStream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::client::RealityClientOptions;
use crate::tls13_client::Established;

const MAX_FOLLOW_UPS: i64 = 8;
const MAX_BODY: usize = 1 << 20;
const CRAWL_BUDGET: Duration = Duration::from_secs(30);
/// A current Chrome's navigation user agent (Xray sends one as well).
const USER_AGENT: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/133.0.0.0 Safari/537.36";

/// A random number in `low..=high` (Xray's `crypto.RandBetween`; a reversed range gives low).
fn between(low: i64, high: i64) -> i64 {
    if high <= low {
        return low;
    }
    let mut b = [0u8; 8];
    skiff_crypto::random::fill(&mut b);
    low + (u64::from_be_bytes(b) % (high - low + 1) as u64) as i64
}

/// Starts the crawl on `established` and waits the return interval.
pub(super) async fn crawl_then_wait(established: Established, options: &RealityClientOptions) {
    let h2 = established.alpn.as_deref() == Some(&b"h2"[..]);
    if let Ok(stream) = established.into_stream() {
        let options = options.clone();
        tokio::spawn(async move {
            let _ = tokio::time::timeout(CRAWL_BUDGET, crawl(stream, h2, &options)).await;
        });
    }
    let y = &options.spider_y;
    let wait = between(y[8], y[9]).clamp(0, 10_000) as u64;
    tokio::time::sleep(Duration::from_millis(wait)).await;
}

async fn crawl(stream: BoxStream, h2: bool, o: &RealityClientOptions) {
    let y = &o.spider_y;
    let first = if o.spider_x.starts_with('/') {
        o.spider_x.clone()
    } else {
        "/".to_string()
    };
    let follow_ups = between(y[2], y[3]).clamp(0, MAX_FOLLOW_UPS);
    let padding = || "0".repeat(between(y[0], y[1]).clamp(0, 4096) as usize);
    if !h2 {
        // One HTTP/1.1 page: the server chose no h2, so a browser would not pipeline more.
        let _ = http1_get(stream, &o.server_name, &first, &padding()).await;
        return;
    }
    let Ok((client, connection)) = h2::client::handshake(stream).await else {
        return;
    };
    tokio::spawn(connection);
    let mut paths = vec![first.clone()];
    let mut referer = None::<String>;
    for i in 0..=follow_ups {
        let path = if i == 0 {
            first.clone()
        } else {
            paths[between(0, paths.len() as i64 - 1) as usize].clone()
        };
        let Some(body) = h2_get(
            client.clone(),
            &o.server_name,
            &path,
            referer.as_deref(),
            &padding(),
        )
        .await
        else {
            return;
        };
        for link in links(&body) {
            if paths.len() < 64 && !paths.contains(&link) {
                paths.push(link);
            }
        }
        referer = Some(format!("https://{}{}", o.server_name, path));
        if i > 0 {
            let pause = between(y[6], y[7]).clamp(0, 5_000) as u64;
            tokio::time::sleep(Duration::from_millis(pause)).await;
        }
    }
}

async fn h2_get(
    client: h2::client::SendRequest<Bytes>,
    host: &str,
    path: &str,
    referer: Option<&str>,
    padding: &str,
) -> Option<Vec<u8>> {
    let mut request = http::Request::get(format!("https://{host}{path}"))
        .header("user-agent", USER_AGENT)
        .header(
            "accept",
            "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
        )
        .header("accept-language", "en-US,en;q=0.9")
        .header("cookie", format!("padding={padding}"));
    if let Some(r) = referer {
        request = request.header("referer", r);
    }
    let request = request.body(()).ok()?;
    let mut client = client.ready().await.ok()?;
    let (response, _) = client.send_request(request, true).ok()?;
    let mut body = response.await.ok()?.into_body();
    let mut out = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.ok()?;
        let _ = body.flow_control().release_capacity(chunk.len());
        out.extend_from_slice(&chunk[..chunk.len().min(MAX_BODY - out.len())]);
        if out.len() >= MAX_BODY {
            break;
        }
    }
    Some(out)
}

async fn http1_get(
    mut stream: BoxStream,
    host: &str,
    path: &str,
    padding: &str,
) -> std::io::Result<()> {
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: {USER_AGENT}\r\nAccept: text/html\r\nCookie: padding={padding}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    stream.flush().await?;
    let mut buf = vec![0u8; 16 * 1024];
    let mut total = 0;
    while total < MAX_BODY {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        total += n;
    }
    Ok(())
}

/// Same-site links as Xray's spider takes them: `href="/…"` or `href="h…"` with the site
/// prefix stripped, without a dot (pages, not files).
fn links(body: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(body);
    let mut out = Vec::new();
    for part in text.split("href=\"").skip(1) {
        let Some(end) = part.find('"') else { continue };
        let link = &part[..end];
        if link.starts_with('/') && !link.contains('.') && out.len() < 64 {
            out.push(link.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_keep_site_pages_only() {
        let body = br#"<a href="/about">a</a><a href="/logo.png">b</a><a href="https://x.y/">c</a><a href="/docs/">d</a>"#;
        assert_eq!(
            links(body),
            vec!["/about".to_string(), "/docs/".to_string()]
        );
    }

    #[test]
    fn between_stays_in_range() {
        for _ in 0..100 {
            let v = between(3, 7);
            assert!((3..=7).contains(&v));
        }
        assert_eq!(between(5, 1), 5);
    }
}
