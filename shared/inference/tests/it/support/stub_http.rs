//! A minimal HTTP/1.1 server on 127.0.0.1 standing in for a paid remote API, so the real
//! client code (async-openai, reqwest) runs against it. Records every request.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone)]
pub struct Recorded {
    pub path: String,
    pub authorization: String,
    pub body: serde_json::Value,
}

pub struct StubServer {
    pub base_url: String,
    pub requests: Arc<Mutex<Vec<Recorded>>>,
}

/// Serves until the test process ends; `reply(path, body)` gives (status, JSON body).
pub fn start(
    reply: impl Fn(&str, &serde_json::Value) -> (u16, serde_json::Value) + Send + 'static,
) -> StubServer {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let base_url = format!("http://{}/v1", listener.local_addr().expect("addr"));
    let requests = Arc::new(Mutex::new(Vec::new()));
    let log = requests.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut request_line = String::new();
            if reader.read_line(&mut request_line).is_err() {
                continue;
            }
            let path = request_line
                .split_whitespace()
                .nth(1)
                .unwrap_or_default()
                .to_owned();
            let (mut length, mut authorization) = (0usize, String::new());
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                let (name, value) = line.split_once(':').unwrap_or_default();
                match name.to_ascii_lowercase().as_str() {
                    "content-length" => length = value.trim().parse().unwrap_or(0),
                    "authorization" => authorization = value.trim().to_owned(),
                    _ => {}
                }
            }
            let mut body = vec![0; length];
            if reader.read_exact(&mut body).is_err() {
                continue;
            }
            let body: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            let (status, response) = reply(&path, &body);
            log.lock().expect("log").push(Recorded {
                path,
                authorization,
                body,
            });
            let payload = response.to_string();
            let _ = write!(
                stream,
                "HTTP/1.1 {status} Stub\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{payload}",
                payload.len()
            );
        }
    });
    StubServer { base_url, requests }
}
