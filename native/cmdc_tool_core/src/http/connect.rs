//! The TCP connector under the client's TLS: hyper-util's `HttpConnector`, its connections
//! counting the bytes read since their last write. After a request fails on a kept-alive
//! connection, that count tells whether the server closed it before one byte of the answer
//! (it timed the idle connection out as the request arrived: safe to send again) or after the
//! answer began (the server acted on the request: never sent again).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper::rt::{Read, ReadBufCursor, Write};
use hyper::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tower_service::Service;

/// Bytes a connection read since it last wrote (shared with the connection's `Connected`).
#[derive(Debug, Clone, Default)]
pub struct ReadSinceWrite(Arc<AtomicU64>);

impl ReadSinceWrite {
    /// The count now.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}

/// `HttpConnector`, its streams wrapped in [`Counted`].
#[derive(Clone)]
pub struct Connector(pub HttpConnector);

/// A TCP stream that counts the bytes read since its last write.
pub struct Counted {
    tcp: TcpStream,
    read: ReadSinceWrite,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl Service<Uri> for Connector {
    type Response = Counted;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Counted, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.0.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connecting = self.0.call(uri);
        Box::pin(async move {
            let tcp = connecting.await?.into_inner();
            Ok(Counted {
                tcp,
                read: ReadSinceWrite::default(),
            })
        })
    }
}

impl Connection for Counted {
    fn connected(&self) -> Connected {
        self.tcp.connected().extra(self.read.clone())
    }
}

impl Read for Counted {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        quickack(&this.tcp);
        // As hyper-util's `TokioIo` does: tokio reads into the cursor's unfilled part, which
        // it initializes or leaves alone, and says how much it filled.
        let n = unsafe {
            let mut tbuf = tokio::io::ReadBuf::uninit(buf.as_mut());
            match AsyncRead::poll_read(Pin::new(&mut this.tcp), cx, &mut tbuf) {
                Poll::Ready(Ok(())) => tbuf.filled().len(),
                other => return other,
            }
        };
        unsafe { buf.advance(n) };
        this.read.0.fetch_add(n as u64, Ordering::AcqRel);
        Poll::Ready(Ok(()))
    }
}

/// Linux's TCP_QUICKACK, set again before each read (the kernel clears it): a server that
/// writes an answer's head and body apart without TCP_NODELAY (Nagle; Python's `http.server`)
/// waits for the ACK of the head before it sends the body, and a delayed ACK costs ~40 ms per
/// request on a kept-alive connection.
#[cfg(target_os = "linux")]
fn quickack(tcp: &TcpStream) {
    use std::os::fd::AsRawFd;
    let one: libc::c_int = 1;
    // SAFETY: a valid socket descriptor and a c_int option of the right size; a failure only
    // leaves the delayed ACK in place.
    unsafe {
        libc::setsockopt(
            tcp.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_QUICKACK,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn quickack(_tcp: &TcpStream) {}

impl Write for Counted {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = AsyncWrite::poll_write(Pin::new(&mut this.tcp), cx, data);
        if matches!(written, Poll::Ready(Ok(n)) if n > 0) {
            this.read.0.store(0, Ordering::Release);
        }
        written
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = AsyncWrite::poll_write_vectored(Pin::new(&mut this.tcp), cx, bufs);
        if matches!(written, Poll::Ready(Ok(n)) if n > 0) {
            this.read.0.store(0, Ordering::Release);
        }
        written
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        AsyncWrite::poll_flush(Pin::new(&mut self.get_mut().tcp), cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        AsyncWrite::poll_shutdown(Pin::new(&mut self.get_mut().tcp), cx)
    }
}
