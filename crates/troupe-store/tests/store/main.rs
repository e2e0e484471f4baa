//! The store's integration tests: every operation through the public traits.
//! One test binary for the crate.
//!
//! The conformance tests (everything written with [`conformance!`]) run the
//! same body against both backends: SQLite in a temporary folder, and
//! PostgreSQL in a fresh database of this binary's private cluster
//! ([`troupe_testkit::postgres`]). Tests of one backend's own files or
//! settings live in `files.rs` (SQLite) and `postgres.rs`.

mod a2a;
mod approvals;
mod board;
mod crash;
mod events;
mod files;
mod gateway;
mod leases;
mod locks;
mod mailbox;
mod plans;
mod postgres;
mod registry;
mod sessions;
mod usage;
mod workers;

use std::path::PathBuf;

use troupe_store::{PgStore, SqliteStore, Store};

/// Define tests whose body runs once per backend: `fn name(s) { ... }`
/// becomes the module `name` with the tests `sqlite` and `postgres`, each
/// handing the body a fresh [`TestStore`] as `s`.
#[macro_export]
macro_rules! conformance {
    ($($(#[$meta:meta])* fn $name:ident($s:ident) $body:block)*) => {$(
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            fn body($s: $crate::TestStore) $body
            #[test]
            fn sqlite() {
                body($crate::TestStore::sqlite())
            }
            #[test]
            fn postgres() {
                body($crate::TestStore::postgres())
            }
        }
    )*};
}

/// A fresh store of one backend, with what keeps its database alive.
pub struct TestStore {
    handle: Handle,
    place: Place,
    _dir: Option<tempfile::TempDir>,
}

enum Handle {
    Sqlite(SqliteStore),
    Postgres(PgStore),
}

/// Where a test store's database is: a file or a URL.
#[derive(Clone, Debug)]
pub enum Place {
    /// An SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL database.
    Postgres(String),
}

impl Place {
    /// Open another handle on this database (as another process would).
    pub fn open(&self) -> Box<dyn Store> {
        match self {
            Place::Sqlite(path) => Box::new(SqliteStore::open(path).unwrap()),
            Place::Postgres(url) => Box::new(PgStore::open(url).unwrap()),
        }
    }

    /// The file path or URL, as text (for a child process).
    pub fn text(&self) -> String {
        match self {
            Place::Sqlite(path) => path.display().to_string(),
            Place::Postgres(url) => url.clone(),
        }
    }

    /// [`Place::text`] read back.
    pub fn parse(text: &str) -> Place {
        if text.starts_with("postgres") { Place::Postgres(text.into()) } else { Place::Sqlite(text.into()) }
    }

    /// The store's invariants broken in this database (empty when sound).
    pub fn verify(&self) -> Vec<String> {
        match self {
            Place::Sqlite(path) => SqliteStore::open(path).unwrap().verify().unwrap(),
            Place::Postgres(url) => PgStore::open(url).unwrap().verify().unwrap(),
        }
    }
}

impl TestStore {
    /// A store in a new SQLite file.
    pub fn sqlite() -> TestStore {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("troupe.db");
        let handle = Handle::Sqlite(SqliteStore::open(&path).unwrap());
        TestStore { handle, place: Place::Sqlite(path), _dir: Some(dir) }
    }

    /// A store in a new PostgreSQL database.
    pub fn postgres() -> TestStore {
        let url = troupe_testkit::postgres::database();
        let handle = Handle::Postgres(PgStore::open(&url).unwrap());
        TestStore { handle, place: Place::Postgres(url), _dir: None }
    }

    /// Another fresh, empty store of the same backend.
    pub fn fresh(&self) -> TestStore {
        match self.handle {
            Handle::Sqlite(_) => TestStore::sqlite(),
            Handle::Postgres(_) => TestStore::postgres(),
        }
    }

    /// Where its database is.
    pub fn place(&self) -> &Place {
        &self.place
    }

    /// The store's invariants this database breaks (empty when sound).
    pub fn verify(&self) -> Vec<String> {
        match &self.handle {
            Handle::Sqlite(s) => s.verify().unwrap(),
            Handle::Postgres(s) => s.verify().unwrap(),
        }
    }
}

impl std::ops::Deref for TestStore {
    type Target = dyn Store;

    fn deref(&self) -> &(dyn Store + 'static) {
        match &self.handle {
            Handle::Sqlite(s) => s,
            Handle::Postgres(s) => s,
        }
    }
}

/// A fresh SQLite store in its own temporary folder (kept alive by the returned guard).
pub fn store() -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("troupe.db")).unwrap();
    (dir, store)
}

/// Assert the database passes its integrity check and the store's invariants.
pub fn assert_sound(store: &TestStore) {
    let problems = store.verify();
    assert!(problems.is_empty(), "{problems:#?}");
}
