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
use troupe_core::config::StoreConfig;
use troupe_core::layout::Layout;
use troupe_store::Store;

use crate::driver::plan_io;
use crate::driver::teammate::Report;
use crate::machine::Event;

type StoreJob = Box<dyn FnOnce(&dyn Store) -> Result<(), Failure> + Send>;

/// How a failed store job is handed on.
enum Failure {
    /// A command the run depends on: the machine hears `CommandFailed`.
    Command(&'static str, String),
    /// Bookkeeping (the registry, a note): the user is told, the run goes on.
    Note(String),
}

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
    /// Start the thread for `feature` of the project at `layout`, on the store
    /// `store` names; failures come back on `events`.
    pub fn start(layout: Layout, store: StoreConfig, feature: String, events: UnboundedSender<Report>) -> Bookkeeper {
        let (jobs, rx) = mpsc::channel::<Job>();
        let thread = std::thread::spawn(move || {
            let tasks_file: PathBuf = layout.tasks_file(&feature);
            let store = troupe_store::open(&layout, &store).map_err(|e| format!("cannot open the store: {e}"));
            // The receiver is the run's loop, which closes this thread before it ends.
            let report = |failure: Failure| {
                let _ = events.send(match failure {
                    Failure::Command(command, error) => {
                        Report::Lead(Event::CommandFailed { command: command.into(), error })
                    }
                    Failure::Note(text) => Report::Note(text),
                });
            };
            while let Ok(first) = rx.recv() {
                let mut batch = Vec::new();
                let mut flushes = Vec::new();
                for job in std::iter::once(first).chain(rx.try_iter()) {
                    match job {
                        Job::Done(ids) => batch.extend(ids),
                        Job::Store(f) => match &store {
                            Ok(store) => f(store.as_ref()).unwrap_or_else(&report),
                            Err(e) => report(Failure::Command("store", e.clone())),
                        },
                        Job::Flush(done) => flushes.push(done),
                    }
                }
                if !batch.is_empty() {
                    let result = match &store {
                        Ok(store) => plan_io::mark_tasks_done(store.as_ref(), &tasks_file, &feature, &batch),
                        Err(e) => Err(e.clone()),
                    };
                    if let Err(error) = result {
                        report(Failure::Command("mark-tasks-done", error));
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
        self.queue(Job::Done(tasks));
    }

    /// Run `f` on the thread's store connection, after everything queued
    /// before it; its failure is `command`'s, which the machine hears.
    pub fn store(&self, command: &'static str, f: impl FnOnce(&dyn Store) -> Result<(), String> + Send + 'static) {
        self.queue(Job::Store(Box::new(move |store| f(store).map_err(|e| Failure::Command(command, e)))));
    }

    /// Like [`Bookkeeper::store`] for bookkeeping the run does not depend on
    /// (the agent registry, a note): a failure is shown to the user as `what: error`.
    pub fn record(
        &self,
        what: String,
        f: impl FnOnce(&dyn Store) -> Result<(), troupe_store::StoreError> + Send + 'static,
    ) {
        self.queue(Job::Store(Box::new(move |store| f(store).map_err(|e| Failure::Note(format!("{what}: {e}"))))));
    }

    /// The thread lives until [`Bookkeeper::close`], which takes the sender.
    fn queue(&self, job: Job) {
        if let Some(j) = &self.jobs {
            let _ = j.send(job);
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
