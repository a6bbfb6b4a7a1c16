//! A local stand-in for an EventStreams endpoint, on loopback.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

#[derive(Debug, Default)]
struct Stream {
    /// (SSE id, data) in stream order.
    events: Vec<(String, String)>,
    /// The open connections close after sending this many more events (once).
    disconnect_after: Option<usize>,
    /// A reconnect with `Last-Event-ID` gets this many events before it again.
    duplicate_on_resume: usize,
    /// The `Last-Event-ID` of every connection, in order.
    connections: Vec<Option<String>>,
}

/// A local stand-in for an EventStreams endpoint (`/v2/stream/mediawiki.page_change.v1`),
/// on loopback: Server-Sent Events over plain HTTP/1.1, each with an id in EventStreams'
/// shape (the Kafka topic, partition and offset), resumed after `Last-Event-ID`. It can
/// cut its connections after a number of events and send events again after a resume.
/// A connection without `Last-Event-ID` gets the stream from its start (EventStreams
/// would start from now: a test wants every event it pushed).
#[derive(Debug)]
pub struct StreamStandIn {
    /// The stream's URL.
    pub url: String,
    stream: Arc<Mutex<Stream>>,
    pushed: Arc<tokio::sync::Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for StreamStandIn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

const TOPIC: &str = "eqiad.mediawiki.page_change.v1";

impl StreamStandIn {
    pub async fn start() -> Self {
        let stream = Arc::new(Mutex::new(Stream::default()));
        let pushed = Arc::new(tokio::sync::Notify::new());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the stand-in stream");
        let address = listener.local_addr().expect("address");
        let (shared, notify) = (stream.clone(), pushed.clone());
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(serve_stream(socket, shared.clone(), notify.clone()));
            }
        });
        Self {
            url: format!("http://{address}/v2/stream/mediawiki.page_change.v1"),
            stream,
            pushed,
            task,
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut Stream) -> T) -> T {
        f(&mut self.stream.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Appends an event; returns its SSE id.
    pub fn push(&self, event: &Value) -> String {
        let id = self.with(|stream| {
            let id = json!([{"topic": TOPIC, "partition": 0, "offset": stream.events.len()}])
                .to_string();
            stream.events.push((id.clone(), event.to_string()));
            id
        });
        self.pushed.notify_waiters();
        id
    }

    /// The open connections close after sending `events` more events.
    pub fn disconnect_after(&self, events: usize) {
        self.with(|stream| stream.disconnect_after = Some(events));
        self.pushed.notify_waiters();
    }

    /// Each later resume gets `events` events before its `Last-Event-ID` again.
    pub fn duplicate_on_resume(&self, events: usize) {
        self.with(|stream| stream.duplicate_on_resume = events);
    }

    /// The `Last-Event-ID` of every connection so far.
    pub fn connections(&self) -> Vec<Option<String>> {
        self.with(|stream| stream.connections.clone())
    }
}

async fn serve_stream(
    mut socket: tokio::net::TcpStream,
    stream: Arc<Mutex<Stream>>,
    pushed: Arc<tokio::sync::Notify>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut head = Vec::new();
    let mut buffer = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match socket.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buffer[..n]),
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let last_id = head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("last-event-id")
            .then(|| value.trim().to_owned())
    });
    let lock = || stream.lock().unwrap_or_else(|p| p.into_inner());
    let mut next = {
        let mut stream = lock();
        stream.connections.push(last_id.clone());
        match &last_id {
            Some(id) => stream
                .events
                .iter()
                .position(|(event_id, _)| event_id == id)
                .map_or(0, |at| (at + 1).saturating_sub(stream.duplicate_on_resume)),
            None => 0,
        }
    };
    let response = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n";
    if socket.write_all(response.as_bytes()).await.is_err() {
        return;
    }
    loop {
        let waiting = pushed.notified();
        let (batch, cut) = {
            let mut stream = lock();
            let available: Vec<(String, String)> =
                stream.events[next.min(stream.events.len())..].to_vec();
            match stream.disconnect_after {
                Some(left) if left <= available.len() => {
                    stream.disconnect_after = None;
                    (available[..left].to_vec(), true)
                }
                Some(left) => {
                    stream.disconnect_after = Some(left - available.len());
                    (available, false)
                }
                None => (available, false),
            }
        };
        for (id, data) in &batch {
            let frame = format!("event: message\nid: {id}\ndata: {data}\n\n");
            if socket.write_all(frame.as_bytes()).await.is_err() {
                return;
            }
        }
        next += batch.len();
        if cut {
            let _ = socket.shutdown().await;
            return;
        }
        // A comment now and then, as EventStreams sends, so an idle stream stays open.
        if tokio::time::timeout(std::time::Duration::from_secs(1), waiting)
            .await
            .is_err()
            && socket.write_all(b":\n\n").await.is_err()
        {
            return;
        }
    }
}
