//! The transport against raw sockets: what a client sends that no SDK would (pipelining, two
//! Host headers, a body that never ends, a stream it never reads).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::exchange::{Exchange, Handler, Head};
use super::limits::Limits;
use super::serve::Listener;
use super::stream::{Refused, Sent};

/// Hands each request to the test.
struct ToTest(Mutex<mpsc::UnboundedSender<(Head, Arc<Exchange>)>>);

impl Handler for ToTest {
    fn request(&self, head: Head, exchange: Arc<Exchange>) {
        let _ = self.0.lock().unwrap().send((head, exchange));
    }
}

/// Answers every request with its path and body at once.
struct Echo;

impl Handler for Echo {
    fn request(&self, head: Head, exchange: Arc<Exchange>) {
        let body = format!("{} {}", head.path, String::from_utf8_lossy(&head.body));
        let headers = vec![("content-type".to_owned(), "text/plain".to_owned())];
        exchange.reply(200, headers, Bytes::from(body)).unwrap();
    }
}

fn start(limits: Limits, handler: Arc<dyn Handler>) -> Listener {
    let socket = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    Listener::start(socket, limits, handler, &tokio::runtime::Handle::current()).unwrap()
}

fn to_test(limits: Limits) -> (Listener, mpsc::UnboundedReceiver<(Head, Arc<Exchange>)>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (start(limits, Arc::new(ToTest(Mutex::new(tx)))), rx)
}

async fn read_all(mut socket: TcpStream) -> String {
    let mut out = Vec::new();
    let _ = socket.read_to_end(&mut out).await;
    String::from_utf8_lossy(&out).into_owned()
}

fn post(path: &str, body: &str, last: bool) -> String {
    let close = if last { "Connection: close\r\n" } else { "" };
    format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{close}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

async fn connect(addr: SocketAddr) -> TcpStream {
    TcpStream::connect(addr).await.unwrap()
}

#[tokio::test]
async fn pipelined_requests_are_answered_in_order() {
    let server = start(Limits::default(), Arc::new(Echo));
    let mut socket = connect(server.addr).await;
    let all = [
        post("/a", "1", false),
        post("/b", "22", false),
        post("/c", "333", true),
    ]
    .concat();
    socket.write_all(all.as_bytes()).await.unwrap();
    let text = read_all(socket).await;
    assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 3, "{text}");
    let (a, b, c) = (
        text.find("/a 1").unwrap(),
        text.find("/b 22").unwrap(),
        text.find("/c 333").unwrap(),
    );
    assert!(a < b && b < c, "{text}");
}

#[tokio::test]
async fn two_host_or_origin_headers_are_a_400() {
    let server = start(Limits::default(), Arc::new(Echo));
    for extra in [
        "Host: evil.example\r\n",
        "Origin: http://localhost\r\nOrigin: http://evil.example\r\n",
    ] {
        let mut socket = connect(server.addr).await;
        let req = format!("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}\r\n");
        socket.write_all(req.as_bytes()).await.unwrap();
        let text = read_all(socket).await;
        assert!(text.starts_with("HTTP/1.1 400"), "{text}");
        assert!(text.contains("more than one"), "{text}");
        assert!(text.contains("\"code\":-32600"), "{text}");
    }
}

#[tokio::test]
async fn foreign_origin_and_host_are_refused() {
    let server = start(Limits::default(), Arc::new(Echo));
    for (headers, why) in [
        (
            "Host: 127.0.0.1\r\nOrigin: http://evil.example\r\n",
            "Origin",
        ),
        ("Host: evil.example:80\r\n", "Host"),
        ("Host: localhost:1\r\nOrigin: http://[::1]:3000\r\n", ""),
    ] {
        let mut socket = connect(server.addr).await;
        let req = format!("GET /x HTTP/1.1\r\n{headers}Connection: close\r\n\r\n");
        socket.write_all(req.as_bytes()).await.unwrap();
        let text = read_all(socket).await;
        if why.is_empty() {
            assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        } else {
            assert!(text.starts_with("HTTP/1.1 403"), "{text}");
            assert!(text.contains(why), "{text}");
        }
    }
}

#[tokio::test]
async fn a_declared_body_over_the_limit_is_refused_on_its_head() {
    let limits = Limits {
        max_body: 1000,
        ..Limits::default()
    };
    let server = start(limits, Arc::new(Echo));
    let mut socket = connect(server.addr).await;
    let head = "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5000000\r\n\r\n";
    socket.write_all(head.as_bytes()).await.unwrap();
    let text = read_all(socket).await;
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(text.contains("over 1000 bytes"), "{text}");
}

#[tokio::test]
async fn a_chunked_body_over_the_limit_is_a_413() {
    let limits = Limits {
        max_body: 1000,
        ..Limits::default()
    };
    let server = start(limits, Arc::new(Echo));
    let mut socket = connect(server.addr).await;
    let chunk = format!("{:x}\r\n{}\r\n", 800, "x".repeat(800));
    let req = format!(
        "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n{chunk}{chunk}0\r\n\r\n"
    );
    socket.write_all(req.as_bytes()).await.unwrap();
    let text = read_all(socket).await;
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
}

#[tokio::test]
async fn the_body_timer_runs_from_the_head_not_from_a_piece_size() {
    let limits = Limits {
        body_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let server = start(limits, Arc::new(Echo));
    let mut socket = connect(server.addr).await;
    // Ten bytes of a hundred, then nothing: the answer is a 408, not a wait for more.
    let req = "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n0123456789";
    socket.write_all(req.as_bytes()).await.unwrap();
    let text = read_all(socket).await;
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains(":body_timeout_ms"), "{text}");
}

#[tokio::test]
async fn a_client_leaving_before_its_answer_is_told_to_the_handler() {
    let (server, mut requests) = to_test(Limits::default());
    let mut socket = connect(server.addr).await;
    socket
        .write_all(post("/slow", "{}", false).as_bytes())
        .await
        .unwrap();
    let (_head, exchange) = requests.recv().await.unwrap();
    let (tx, mut gone) = mpsc::unbounded_channel();
    assert!(exchange.on_gone(Box::new(move || {
        let _ = tx.send(());
    })));
    drop(socket);
    gone.recv().await.unwrap();
    assert!(exchange.is_gone());
    assert!(!exchange.on_gone(Box::new(|| panic!("run after the client left"))));
    assert!(exchange.reply(200, vec![], Bytes::new()).is_err());
}

/// A server whose streams hold 64 kB before dropping progress and 256 kB in all, one request
/// on it (never read) and its exchange.
async fn small_streams() -> (Listener, TcpStream, Arc<Exchange>) {
    let limits = Limits {
        stream_soft_bytes: 64 * 1024,
        stream_hard_bytes: 256 * 1024,
        ..Limits::default()
    };
    let (server, mut requests) = to_test(limits);
    let mut socket = connect(server.addr).await;
    socket
        .write_all(post("/mcp", "{}", false).as_bytes())
        .await
        .unwrap();
    let (_head, exchange) = requests.recv().await.unwrap();
    (server, socket, exchange)
}

#[tokio::test]
async fn a_stream_nobody_reads_is_bounded_then_closed() {
    let (_server, socket, exchange) = small_streams().await;
    let (tx, mut gone) = mpsc::unbounded_channel();
    assert!(exchange.on_gone(Box::new(move || {
        let _ = tx.send(());
    })));
    let stream = exchange.stream(200, vec![]).unwrap();
    let event = Bytes::from(vec![b'x'; 16 * 1024]);
    let (mut dropped, mut full) = (0, false);
    // The socket's buffers take a few MB, then the queue fills: progress is dropped, and a
    // result that does not fit closes the stream. 1 GB of events would be sent otherwise.
    for i in 0..65_536 {
        assert!(stream.queued_bytes() <= 256 * 1024);
        match stream.send(event.clone(), i % 4 != 3) {
            Ok(Sent::Queued) => {}
            Ok(Sent::Dropped) => dropped += 1,
            Err(Refused::Full) => {
                full = true;
                break;
            }
            Err(Refused::Closed) => panic!("closed before full"),
        }
        tokio::task::yield_now().await;
    }
    assert!(
        full,
        "the stream never filled: {} queued, {dropped} dropped",
        stream.queued_bytes()
    );
    assert!(dropped > 0, "progress was never dropped first");
    assert_eq!(stream.send(event, false), Err(Refused::Closed));
    gone.recv().await.unwrap();
    drop(socket);
}

#[tokio::test]
async fn progress_alone_to_a_client_that_never_reads_closes_the_stream_too() {
    let (_server, socket, exchange) = small_streams().await;
    let stream = exchange.stream(200, vec![]).unwrap();
    let event = Bytes::from(vec![b'p'; 16 * 1024]);
    let mut outcome = None;
    for _ in 0..65_536 {
        if let Err(refused) = stream.send(event.clone(), true) {
            outcome = Some(refused);
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(outcome, Some(Refused::Full));
    // The limit counts what was dropped: a bit over `hard` past the point the queue was full.
    assert!(stream.dropped() <= 17, "{} dropped", stream.dropped());
    drop(socket);
}

#[tokio::test]
async fn a_stream_read_to_its_end_is_done_not_gone() {
    let (server, mut requests) = to_test(Limits::default());
    let mut socket = connect(server.addr).await;
    socket
        .write_all(post("/mcp", "{}", true).as_bytes())
        .await
        .unwrap();
    let (_head, exchange) = requests.recv().await.unwrap();
    let headers = vec![("content-type".to_owned(), "text/event-stream".to_owned())];
    let stream = exchange.stream(200, headers).unwrap();
    for n in 0..3 {
        let event = format!("event: message\ndata: {n}\n\n");
        assert_eq!(stream.send(Bytes::from(event), true), Ok(Sent::Queued));
    }
    stream.finish();
    let text = read_all(socket).await;
    assert!(
        text.contains("data: 0") && text.contains("data: 2"),
        "{text}"
    );
    assert!(text.contains("transfer-encoding: chunked"), "{text}");
    assert!(!exchange.is_gone());
}

#[tokio::test]
async fn closing_the_listener_ends_its_connections() {
    let (server, mut requests) = to_test(Limits::default());
    let mut socket = connect(server.addr).await;
    socket
        .write_all(post("/mcp", "{}", false).as_bytes())
        .await
        .unwrap();
    let (_head, exchange) = requests.recv().await.unwrap();
    let (tx, mut gone) = mpsc::unbounded_channel();
    assert!(exchange.on_gone(Box::new(move || {
        let _ = tx.send(());
    })));
    drop(server);
    gone.recv().await.unwrap();
    assert_eq!(read_all(socket).await, "");
}
