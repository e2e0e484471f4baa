//! The speed targets of issue 15, measured in process over real HTTP on
//! loopback (the server on its own runtime, ureq clients on threads):
//! `GET /tasks/board?available=true` on 10k tasks, a claim through HTTP, and
//! store commit → SSE client with 50 clients connected. Numbers go to
//! BENCHMARKS.md; nothing here is asserted.
//!
//! `cargo bench -p troupe-server --bench server`

use std::sync::Arc;
use std::time::{Duration, Instant};

use troupe_core::layout::Layout;
use troupe_server::AppState;
use troupe_server::auth::Auth;
use troupe_store::{Board, EventLog, NewTask, SqliteStore, Store};

fn serve(dir: &std::path::Path) -> String {
    let layout = Layout::new(dir);
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open_project(&layout).unwrap());
    let state = AppState::new(layout, store, Default::default(), Auth::open());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            troupe_server::serve(listener, state, std::future::pending()).await.unwrap();
        });
    });
    format!("http://{}", rx.recv().unwrap())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{name}: n={} p50={:.2?} p95={:.2?} p99={:.2?} max={:.2?}",
        samples.len(),
        percentile(&samples, 0.50),
        percentile(&samples, 0.95),
        percentile(&samples, 0.99),
        samples[samples.len() - 1]
    );
}

/// Claim tasks `t{i}` one after another; the time of each.
fn claim_all(http: &ureq::Agent, url: &str, ids: impl Iterator<Item = usize>) -> Vec<Duration> {
    let mut times = Vec::new();
    for i in ids {
        let start = Instant::now();
        let res = http
            .post(&format!("{url}/tasks/board/t{i}/claim"))
            .send_json(serde_json::json!({"agent": "bench"}))
            .unwrap();
        times.push(start.elapsed());
        assert_eq!(res.status(), 200);
    }
    times
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".troupe/state")).unwrap();
    let url = serve(dir.path());
    let store = SqliteStore::open_project(&Layout::new(dir.path())).unwrap();
    let http: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();

    // 10k tasks: half of them blocked, so `available` has 5k to return.
    let tasks: Vec<NewTask> = (0..10_000)
        .map(|i| {
            let t = NewTask::new(format!("task {i}"), "bench").with_id(format!("t{i}"));
            if i % 2 == 1 { t.blocked_by([format!("t{}", i - 1)]) } else { t }
        })
        .collect();
    store.create_tasks(tasks).unwrap();
    let mut board = Vec::new();
    for i in 0..220 {
        let start = Instant::now();
        let mut res = http.get(&format!("{url}/tasks/board?available=true")).call().unwrap();
        let body = res.body_mut().read_to_string().unwrap();
        if i >= 20 {
            board.push(start.elapsed());
        }
        assert!(body.len() > 1_000_000, "the answer holds the 5k available tasks");
    }
    report("GET /tasks/board?available=true (10k tasks, 5k available)", board);

    // The same after a write each time (another store handle, as another
    // process): the listing kept for the last event id cannot answer, so
    // every request reads and writes the tasks again.
    let mut fresh = Vec::new();
    for (n, i) in (6000..6440).step_by(2).enumerate() {
        store.claim(&format!("t{i}"), "writer").unwrap();
        let start = Instant::now();
        let mut res = http.get(&format!("{url}/tasks/board?available=true")).call().unwrap();
        let body = res.body_mut().read_to_string().unwrap();
        if n >= 20 {
            fresh.push(start.elapsed());
        }
        assert!(!body.contains(&format!("\"t{i}\"")), "the claimed task is no longer listed");
    }
    report("GET /tasks/board?available=true after a write each time", fresh);

    report("POST /tasks/board/{id}/claim", claim_all(&http, &url, (0..4000).step_by(2)));

    // The same while two clients list the board without pause: reads run on
    // the store's reading connections, so a claim waits for no listing.
    let listing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (url, listing, http) = (url.clone(), listing.clone(), http.clone());
            std::thread::spawn(move || {
                while listing.load(std::sync::atomic::Ordering::Relaxed) {
                    let mut res = http.get(&format!("{url}/tasks/board?available=true")).call().unwrap();
                    res.body_mut().read_to_string().unwrap();
                }
            })
        })
        .collect();
    let busy = claim_all(&http, &url, (4000..6000).step_by(2));
    listing.store(false, std::sync::atomic::Ordering::Relaxed);
    readers.into_iter().for_each(|r| r.join().unwrap());
    report("POST /tasks/board/{id}/claim while 2 clients list the board", busy);

    // 50 clients; another store handle (as another process) commits.
    const CLIENTS: usize = 50;
    const EVENTS: usize = 100;
    let writer = SqliteStore::open_project(&Layout::new(dir.path())).unwrap();
    // Every client starts at the end of the log: only the live events count.
    let end = writer.events_since(0, u32::MAX).unwrap().last().map_or(0, |e| e.id);
    let (tx, rx) = std::sync::mpsc::channel::<(usize, Instant)>();
    let mut streams = Vec::new();
    for _ in 0..CLIENTS {
        let mut s = troupe_testkit::sse::Stream::connect(&url, &format!("?kind=task_created&after={end}"), None, None);
        let tx = tx.clone();
        streams.push(std::thread::spawn(move || {
            for _ in 0..EVENTS {
                let (_, e) = s.event();
                let n: usize = e["data"]["subject"].as_str().unwrap().trim_start_matches("live ").parse().unwrap();
                tx.send((n, Instant::now())).unwrap();
            }
        }));
    }
    drop(tx);
    std::thread::sleep(Duration::from_millis(300));
    let mut committed = Vec::new();
    for n in 0..EVENTS {
        writer.create_task(NewTask::new(format!("live {n}"), "bench")).unwrap();
        committed.push(Instant::now());
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut latencies = Vec::new();
    for (n, at) in rx {
        latencies.push(at.saturating_duration_since(committed[n]));
    }
    for s in streams {
        s.join().unwrap();
    }
    report("store commit (another handle) -> SSE client, 50 clients", latencies);
}
