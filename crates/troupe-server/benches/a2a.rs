//! A2A SendMessage → task created, end to end over HTTP: a real server on a
//! loopback port (the router `troupe serve` runs, on a fresh SQLite store),
//! a keep-alive connection, and a JSON-RPC SendMessage (post-task,
//! returnImmediately) per sample; the time until the answer with the created
//! task is read. Target (issue 15): p50 and p99 < 10 ms.
//!
//! cargo bench -p troupe-server --bench a2a

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use troupe_server::AppState;
use troupe_server::auth::Auth;

const SAMPLES: usize = 500;
const WARM_UP: usize = 30;

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let layout = troupe_core::layout::Layout::new(dir.path());
    let store: Arc<dyn troupe_store::Store> =
        Arc::new(troupe_store::SqliteStore::open(&dir.path().join("troupe.db")).unwrap());
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let addr = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = AppState::new(layout, store, Default::default(), Auth::open());
        tokio::spawn(troupe_server::serve(listener, state, std::future::pending()));
        addr
    });
    let mut conn = TcpStream::connect(addr).unwrap();
    conn.set_nodelay(true).unwrap();
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut times = Vec::with_capacity(SAMPLES);
    for i in 0..WARM_UP + SAMPLES {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{i},"method":"SendMessage","params":{{"message":{{"messageId":"m{i}","role":"ROLE_USER","parts":[{{"text":"task {i}"}}],"metadata":{{"x-troupe-skill":"post-task"}}}},"configuration":{{"returnImmediately":true}}}}}}"#
        );
        let request = format!(
            "POST /a2a/jsonrpc HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\na2a-version: 1.0\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        let started = Instant::now();
        conn.write_all(request.as_bytes()).unwrap();
        let answer = read_response(&mut reader);
        let took = started.elapsed();
        assert!(answer.contains("TASK_STATE_SUBMITTED"), "{answer}");
        if i >= WARM_UP {
            times.push(took);
        }
    }
    times.sort();
    let at = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)];
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "A2A SendMessage -> task created ({SAMPLES} samples): p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        ms(at(0.50)),
        ms(at(0.90)),
        ms(at(0.99)),
        ms(*times.last().unwrap())
    );
}

/// One HTTP/1.1 response with a content-length body; its body.
fn read_response(reader: &mut BufReader<TcpStream>) -> String {
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    String::from_utf8(body).unwrap()
}
