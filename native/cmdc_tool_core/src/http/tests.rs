//! The client against servers written here on raw sockets: what it reads of each answer, and
//! which connections it keeps.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use super::client::{exchange, Bounds, Client, Credits, Event, Failure, Settings, Stage};

const BOUNDS: Bounds = Bounds {
    max_body: 1_000,
    max_error_body: 100,
    events: true,
};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A server answering every request of every connection with `answer`; counts connections.
async fn serve(answer: Vec<u8>) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(answer_all(socket, answer.clone()));
        }
    });
    (url, accepted)
}

/// Reads each request's head (these requests have no body) and writes `answer`, until the
/// client hangs up.
async fn answer_all(mut socket: TcpStream, answer: Vec<u8>) {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match socket.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
        while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
            seen.drain(..end + 4);
            if socket.write_all(&answer).await.is_err() {
                return;
            }
        }
    }
}

fn get(url: &str) -> super::client::Request {
    super::client::Request {
        method: "GET".into(),
        url: url.into(),
        headers: vec![("accept".into(), "text/event-stream".into())],
        body: Bytes::new(),
    }
}

async fn run(client: &Client, url: &str) -> (Vec<Event>, Result<(), Failure>) {
    let mut events = Vec::new();
    let result = exchange(client, get(url), BOUNDS, &Credits::new(64), |e| {
        events.push(e)
    })
    .await;
    (events, result)
}

#[test]
fn a_body_is_read_whole_and_its_connection_kept_for_the_next_request() {
    runtime().block_on(async {
        let (url, accepted) =
            serve(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok".to_vec()).await;
        let client = Client::new(&Settings::default()).unwrap();
        for _ in 0..10 {
            let (events, result) = run(&client, &url).await;
            assert_eq!(result, Ok(()));
            assert_eq!(events.last(), Some(&Event::Body(Bytes::from_static(b"ok"))));
        }
        // hyper-util may open a spare connection when a request races its predecessor's
        // return to the pool (`settle` makes that rare): reuse, not an exact count.
        let connections = accepted.load(Ordering::SeqCst);
        assert!(
            connections <= 2,
            "{connections} connections for 10 requests"
        );
    });
}

#[test]
fn a_declared_length_over_the_bound_is_refused_before_its_body_is_read() {
    runtime().block_on(async {
        // The body never comes: only the declared length can refuse it.
        let (url, _) =
            serve(b"HTTP/1.1 200 OK\r\ncontent-length: 300000000\r\n\r\n".to_vec()).await;
        let client = Client::new(&Settings::default()).unwrap();
        let (events, result) = run(&client, &url).await;
        assert!(matches!(events[0], Event::Head { status: 200, .. }));
        let failure = result.unwrap_err();
        assert_eq!(failure.stage, Stage::TooBig);
        assert!(
            failure.message.contains("over 1000 bytes"),
            "{}",
            failure.message
        );
    });
}

#[test]
fn an_error_status_body_is_cut_and_its_connection_closed() {
    runtime().block_on(async {
        // Far more than one read: hyper drains a dropped body's rest only when it is at hand.
        let mut answer = b"HTTP/1.1 500 Oops\r\ncontent-length: 5000000\r\n\r\n".to_vec();
        answer.extend(std::iter::repeat_n(b'e', 5_000_000));
        let (url, accepted) = serve(answer).await;
        let client = Client::new(&Settings::default()).unwrap();
        for _ in 0..2 {
            let (events, result) = run(&client, &url).await;
            assert_eq!(result, Ok(()));
            assert_eq!(
                events.last(),
                Some(&Event::Body(Bytes::from(vec![b'e'; 100])))
            );
        }
        // The unread rest spoils the connection: each request opens a new one.
        assert!(accepted.load(Ordering::SeqCst) >= 2);
    });
}

#[test]
fn events_wait_for_credits_and_an_endless_event_is_refused() {
    runtime().block_on(async {
        let mut answer = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n".to_vec();
        for i in 0..10 {
            answer.extend(format!("id: {i}\ndata: {{\"n\": {i}}}\n\n").as_bytes());
        }
        let (url, _) = serve(answer).await;
        let client = Client::new(&Settings::default()).unwrap();
        let credits = Credits::new(2);
        let (tx, mut rx) = mpsc::unbounded_channel();
        let task = {
            let (client, credits) = (client.clone(), credits.clone());
            tokio::spawn(async move {
                exchange(&client, get(&url), BOUNDS, &credits, |e| {
                    tx.send(e).unwrap()
                })
                .await
            })
        };
        assert!(matches!(
            rx.recv().await,
            Some(Event::Head { status: 200, .. })
        ));
        for _ in 0..2 {
            assert!(matches!(rx.recv().await, Some(Event::Event(_))));
        }
        // No credit left: nothing more comes until one is given back.
        let waited = tokio::time::timeout(Duration::from_millis(200), rx.recv()).await;
        assert!(
            waited.is_err(),
            "an event came without a credit: {waited:?}"
        );
        assert_eq!(credits.ack(100), 2);
        let Some(Event::Event(third)) = rx.recv().await else {
            panic!("no third event")
        };
        assert_eq!(third.id.as_deref(), Some("2"));
        task.abort();

        // One event that never ends: refused at max_body.
        let mut endless = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n".to_vec();
        endless.extend(b"data: 0123456789\n".repeat(200));
        let (url, _) = serve(endless).await;
        let (_, result) = run(&client, &url).await;
        assert_eq!(result.unwrap_err().stage, Stage::TooBig);
    });
}

#[test]
fn an_unreachable_server_and_a_bad_header_say_where_they_failed() {
    runtime().block_on(async {
        let client = Client::new(&Settings::default()).unwrap();
        // A port nobody listens on (bound, then closed).
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let (_, result) = run(&client, &format!("http://127.0.0.1:{port}/mcp")).await;
        assert_eq!(result.unwrap_err().stage, Stage::Connect);

        let mut request = get("http://127.0.0.1:1/mcp");
        request.headers.push(("x-bad".into(), "a\r\nb".into()));
        let result = exchange(&client, request, BOUNDS, &Credits::new(1), |_| {}).await;
        let failure = result.unwrap_err();
        assert_eq!(failure.stage, Stage::Send);
        assert!(failure.message.contains("\"x-bad\" is not valid HTTP"));
    });
}

/// Answers each connection's first request with `ok`; its second request is read, then either
/// dropped unanswered (`cut` empty) or answered with `cut`, and the connection closed. Counts
/// connections and second requests.
async fn second_request_fails(cut: &'static [u8]) -> (String, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let (accepted, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (count, fails) = (accepted.clone(), failed.clone());
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let fails = fails.clone();
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                let mut served = 0;
                loop {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                    while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        seen.drain(..end + 4);
                        served += 1;
                        if served == 2 {
                            fails.fetch_add(1, Ordering::SeqCst);
                            let _ = socket.write_all(cut).await;
                            return;
                        }
                        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                        if socket.write_all(ok).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (url, accepted, failed)
}

#[test]
fn a_kept_alive_connection_closed_before_the_answer_is_retried_once_on_a_new_one() {
    runtime().block_on(async {
        let (url, _, dropped) = second_request_fails(b"").await;
        let client = Client::new(&Settings::default()).unwrap();
        for _ in 0..10 {
            let (events, result) = run(&client, &url).await;
            assert_eq!(result, Ok(()), "{events:?}");
        }
        // Every request answered, though second requests on a connection were dropped.
        assert!(dropped.load(Ordering::SeqCst) >= 1);
    });
}

#[test]
fn an_answer_cut_after_its_first_byte_is_never_sent_again() {
    runtime().block_on(async {
        let (url, _, cut) = second_request_fails(b"HTTP/1.").await;
        let client = Client::new(&Settings::default()).unwrap();
        let mut failures = 0;
        for _ in 0..10 {
            if let Err(failure) = run(&client, &url).await.1 {
                assert_eq!(failure.stage, Stage::Send);
                failures += 1;
            }
        }
        // Each cut request failed: none was sent again (and answered) elsewhere.
        assert!(failures >= 1);
        assert_eq!(failures, cut.load(Ordering::SeqCst));
    });
}
