//! Marking tasks done (tasks.yaml and the board) off the driver's loop.
//!
//! Rewriting tasks.yaml and completing board tasks costs milliseconds per
//! report; done inline, 20 reports arriving together would wait on each other
//! and delay every successor's spawn. The machine already knows the tasks are
//! done, so the driver hands the bookkeeping to this thread, which batches what
//! has queued up into one rewrite. `flush` waits for it (before a commit, and at
//! the end of a run). Every other store write of the driver (agent registry,
//! mailbox) goes through the same thread, in order, on one connection: writers
//! on two connections would wait on SQLite's busy handler, which sleeps in
//! steps of up to 100 ms.

use std::path::PathBuf;
use std::sync::mpsc;
use std::thread::JoinHandle;

use tokio::sync::mpsc::UnboundedSender;
use troupe_core::layout::Layout;

use crate::driver::plan_io;
use crate::driver::teammate::Report;
use crate::machine::Event;

type StoreJob = Box<dyn FnOnce(&troupe_store::SqliteStore) + Send>;

enum Job {
    Done(Vec<String>),
    Store(StoreJob),
    Flush(mpsc::Sender<()>),
}

/// The bookkeeping thread of one run.
pub struct Bookkeeper {
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl Bookkeeper {
    /// Start the thread for `feature` of the project at `layout`; failures come back on `events`.
    pub fn start(layout: Layout, feature: String, events: UnboundedSender<Report>) -> Bookkeeper {
        let (jobs, rx) = mpsc::channel::<Job>();
        let thread = std::thread::spawn(move || {
            let tasks_file: PathBuf = layout.tasks_file(&feature);
            let store = troupe_store::SqliteStore::open_project(&layout);
            while let Ok(first) = rx.recv() {
                let mut batch = Vec::new();
                let mut flushes = Vec::new();
                for job in std::iter::once(first).chain(rx.try_iter()) {
                    match job {
                        Job::Done(ids) => batch.extend(ids),
                        Job::Store(f) => {
                            if let Ok(store) = &store {
                                f(store);
                            }
                        }
                        Job::Flush(done) => flushes.push(done),
                    }
                }
                if !batch.is_empty() {
                    let result = match &store {
                        Ok(store) => plan_io::mark_tasks_done(store, &tasks_file, &feature, &batch),
                        Err(e) => Err(format!("cannot open the store: {e}")),
                    };
                    if let Err(error) = result {
                        let _ = events
                            .send(Report::Lead(Event::CommandFailed { command: "mark-tasks-done".into(), error }));
                    }
                }
                for f in flushes {
                    let _ = f.send(());
                }
            }
        });
        Bookkeeper { jobs: Some(jobs), thread: Some(thread) }
    }

    /// Queue tasks to mark done.
    pub fn mark_done(&self, tasks: Vec<String>) {
        if let Some(j) = &self.jobs {
            let _ = j.send(Job::Done(tasks));
        }
    }

    /// Run `f` on the thread's store connection, after everything queued before it.
    pub fn store(&self, f: impl FnOnce(&troupe_store::SqliteStore) + Send + 'static) {
        if let Some(j) = &self.jobs {
            let _ = j.send(Job::Store(Box::new(f)));
        }
    }

    /// Wait until everything queued so far is written.
    pub async fn flush(&self) {
        let Some(j) = &self.jobs else { return };
        let (tx, rx) = mpsc::channel();
        if j.send(Job::Flush(tx)).is_ok() {
            let _ = tokio::task::spawn_blocking(move || rx.recv()).await;
        }
    }

    /// Finish the queue and stop the thread.
    pub fn close(mut self) {
        self.jobs.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
