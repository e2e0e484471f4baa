//! The board listing's last answers, kept by their query and the newest
//! event id read before the tasks were. Every write that changes a task
//! appends an event in the same transaction (the store's rule, both
//! backends), so while the log's newest id is unchanged so is every listing,
//! and an answer of megabytes (10k tasks) is served again without reading or
//! writing a row. A write committed between that read and the tasks' read has
//! a later id: the answer is kept under an id older than what it shows,
//! which the next request (reading the later id) never matches, so nothing
//! stale is ever served.

use std::collections::HashMap;
use std::sync::Mutex;

use axum::body::Bytes;

/// How many different queries are kept (the dashboard's and an API client's).
const QUERIES: usize = 8;

/// No answer larger than this is kept: the cache must not make an idle
/// server big (a listing of 100k tasks is served, just not kept).
const MAX_BODY: usize = 8 << 20;

/// Query → (newest event id when it was read, the JSON answer).
#[derive(Default)]
pub(crate) struct ListingCache(Mutex<HashMap<String, (i64, Bytes)>>);

impl ListingCache {
    /// The answer to `query` read at `newest`, if it is kept.
    pub(crate) fn get(&self, query: &str, newest: i64) -> Option<Bytes> {
        let kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        kept.get(query).filter(|(at, _)| *at == newest).map(|(_, body)| body.clone())
    }

    /// Keep `body`, the answer to `query` with the tasks read after event `newest`.
    pub(crate) fn put(&self, query: String, newest: i64, body: Bytes) {
        if body.len() > MAX_BODY {
            return;
        }
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() >= QUERIES && !kept.contains_key(&query) {
            kept.clear();
        }
        kept.insert(query, (newest, body));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_served_only_for_its_query_at_its_event() {
        let cache = ListingCache::default();
        cache.put("available".into(), 7, Bytes::from_static(b"[1]"));
        assert_eq!(cache.get("available", 7).as_deref(), Some(&b"[1]"[..]));
        assert_eq!(cache.get("available", 8), None, "the log grew: read again");
        assert_eq!(cache.get("all", 7), None, "another query");
        cache.put("available".into(), 8, Bytes::from_static(b"[2]"));
        assert_eq!(cache.get("available", 7), None, "replaced");
        for i in 0..QUERIES {
            cache.put(format!("q{i}"), 1, Bytes::from_static(b"[]"));
        }
        assert!(cache.0.lock().unwrap().len() <= QUERIES, "bounded");
        cache.put("huge".into(), 1, Bytes::from(vec![b' '; MAX_BODY + 1]));
        assert_eq!(cache.get("huge", 1), None, "too large to keep");
    }
}
