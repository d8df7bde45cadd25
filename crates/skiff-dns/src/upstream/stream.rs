//! DNS over a byte stream, TCP (RFC 7766) or TLS (RFC 7858): each message behind its
//! two-byte length. One connection per query: simple, and nothing half-used to keep alive.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::error::DnsError;
use crate::message::{Answer, Question, Reply};

pub async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    question: &Question,
    query: &[u8],
    id: u16,
) -> Result<Answer, DnsError> {
    let len = u16::try_from(query.len()).map_err(|_| DnsError::TooLarge(query.len()))?;
    let mut framed = Vec::with_capacity(query.len() + 2);
    framed.extend_from_slice(&len.to_be_bytes());
    framed.extend_from_slice(query);
    stream.write_all(&framed).await?;
    stream.flush().await?;
    let mut len = [0u8; 2];
    stream.read_exact(&mut len).await.map_err(cut_short)?;
    let len = usize::from(u16::from_be_bytes(len));
    if len == 0 {
        return Err(DnsError::Malformed("empty message".into()));
    }
    // At most 64 KiB, which the length field itself bounds.
    let mut reply = vec![0u8; len];
    stream.read_exact(&mut reply).await.map_err(cut_short)?;
    match question.decode(id, &reply)? {
        Reply::Answer(answer) => Ok(answer),
        // Over a stream there is no smaller carrier to retry on.
        Reply::Truncated => Err(DnsError::Malformed("truncated reply over a stream".into())),
    }
}

fn cut_short(e: std::io::Error) -> DnsError {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        DnsError::Malformed("the server closed the connection mid-reply".into())
    } else {
        DnsError::Io(e)
    }
}
