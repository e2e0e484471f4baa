//! A server-sent-events client for tests of `GET /events`: real HTTP over
//! loopback (ureq), events parsed as the SSE format defines them.

use std::io::{BufRead, BufReader, Read};
use std::time::Duration;

use serde_json::Value;

/// A connected event stream.
pub struct Stream {
    lines: BufReader<Box<dyn Read + Send>>,
}

impl Stream {
    /// Connect to `{base}/events{query}`, resuming after `last` (sent as
    /// `Last-Event-ID`) when given, with `token` as the bearer token when given.
    pub fn connect(base: &str, query: &str, last: Option<i64>, token: Option<&str>) -> Stream {
        let http: ureq::Agent =
            ureq::Agent::config_builder().timeout_recv_body(Some(Duration::from_secs(60))).build().into();
        let mut req = http.get(&format!("{base}/events{query}"));
        if let Some(id) = last {
            req = req.header("Last-Event-ID", &id.to_string());
        }
        if let Some(t) = token {
            req = req.header("Authorization", &format!("Bearer {t}"));
        }
        let res = req.call().unwrap();
        assert_eq!(res.status(), 200);
        let ct = res.headers().get("content-type").unwrap().to_str().unwrap().to_string();
        assert!(ct.starts_with("text/event-stream"), "{ct}");
        Stream { lines: BufReader::new(Box::new(res.into_body().into_reader())) }
    }

    /// The next event (its SSE id and JSON data), or `None` when the server
    /// ended the stream.
    pub fn try_event(&mut self) -> Option<(i64, Value)> {
        let (mut id, mut data) = (None, String::new());
        loop {
            let mut line = String::new();
            if self.lines.read_line(&mut line).unwrap_or(0) == 0 {
                return None;
            }
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                if let Some(id) = id.take() {
                    return Some((id, serde_json::from_str(&data).unwrap()));
                }
                continue;
            }
            if let Some(v) = line.strip_prefix("id:") {
                id = Some(v.trim().parse().unwrap());
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push_str(v.trim_start());
            }
        }
    }

    /// The next event; panics when the stream ended.
    pub fn event(&mut self) -> (i64, Value) {
        self.try_event().expect("the stream ended")
    }

    /// The next `n` events.
    pub fn events(&mut self, n: usize) -> Vec<(i64, Value)> {
        (0..n).map(|_| self.event()).collect()
    }
}
