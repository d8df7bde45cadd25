//! DNS over HTTPS (RFC 8484) on HTTP/2: POST with `application/dns-message` both ways, as
//! Xray sends it. One HTTP/2 connection per server, reused across queries (streams are
//! cheap, handshakes are not) and made again when it has gone away.

use std::sync::Arc;

use bytes::Bytes;
use h2::client::SendRequest;
use rustls::ClientConfig;
use tokio::sync::Mutex;

use super::connect_tcp;
use super::tls;
use crate::config::Host;
use crate::error::DnsError;
use crate::message::{Answer, MAX_MESSAGE, Question, Reply};

const DNS_MESSAGE: &str = "application/dns-message";

pub struct Doh {
    host: Host,
    port: u16,
    uri: String,
    tls: Arc<ClientConfig>,
    connection: Mutex<Option<SendRequest<Bytes>>>,
}

impl Doh {
    pub fn new(host: Host, port: u16, path: &str, tls: Arc<ClientConfig>) -> Doh {
        let authority = match &host {
            Host::Ip(std::net::IpAddr::V6(v6)) => format!("[{v6}]:{port}"),
            Host::Ip(ip) => format!("{ip}:{port}"),
            Host::Name(name) => format!("{name}:{port}"),
        };
        Doh {
            uri: format!("https://{authority}{path}"),
            host,
            port,
            tls,
            connection: Mutex::new(None),
        }
    }

    /// A ready sender: the kept connection if it still takes streams, else a new one.
    async fn sender(&self) -> Result<SendRequest<Bytes>, DnsError> {
        let mut kept = self.connection.lock().await;
        if let Some(sender) = kept.take()
            && let Ok(ready) = sender.ready().await
        {
            *kept = Some(ready.clone());
            return Ok(ready);
        }
        let tcp = connect_tcp(&self.host, self.port).await?;
        let stream = tls::connect(&self.tls, &self.host, tcp).await?;
        if stream.get_ref().1.alpn_protocol() != Some(b"h2") {
            return Err(DnsError::Http(
                "the server did not agree to HTTP/2 (ALPN h2)".into(),
            ));
        }
        let (sender, connection) = h2::client::handshake(stream).await.map_err(http_error)?;
        // The connection's driver: ends when the server closes it or every sender is gone.
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("DoH connection ended: {e}");
            }
        });
        let ready = sender.ready().await.map_err(http_error)?;
        *kept = Some(ready.clone());
        Ok(ready)
    }

    /// One query. RFC 8484 asks for transaction id 0, which keeps replies cacheable by HTTP.
    pub async fn exchange(&self, question: &Question, query: Vec<u8>) -> Result<Answer, DnsError> {
        let mut sender = self.sender().await?;
        let request = http::Request::post(&self.uri)
            .header(http::header::CONTENT_TYPE, DNS_MESSAGE)
            .header(http::header::ACCEPT, DNS_MESSAGE)
            .body(())
            .map_err(|e| DnsError::Http(e.to_string()))?;
        let (response, mut body_out) = sender.send_request(request, false).map_err(http_error)?;
        body_out
            .send_data(Bytes::from(query), true)
            .map_err(http_error)?;
        let response = response.await.map_err(http_error)?;
        let status = response.status();
        if status != http::StatusCode::OK {
            return Err(DnsError::Http(format!("HTTP status {status}")));
        }
        let mut body = response.into_body();
        let mut reply = Vec::new();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.map_err(http_error)?;
            // Stop reading at the limit: memory stays bounded whatever the server sends.
            if reply.len() + chunk.len() > MAX_MESSAGE {
                return Err(DnsError::TooLarge(reply.len() + chunk.len()));
            }
            let _ = body.flow_control().release_capacity(chunk.len());
            reply.extend_from_slice(&chunk);
        }
        match question.decode(0, &reply)? {
            Reply::Answer(answer) => Ok(answer),
            Reply::Truncated => Err(DnsError::Malformed("truncated reply over HTTPS".into())),
        }
    }
}

fn http_error(e: h2::Error) -> DnsError {
    DnsError::Http(e.to_string())
}
