//! The store's integration tests: every operation through the public traits, on
//! a real database file in a temporary folder. One test binary for the crate.

mod a2a;
mod board;
mod crash;
mod files;
mod locks;
mod mailbox;
mod plans;
mod registry;

use troupe_store::SqliteStore;

/// A fresh store in its own temporary folder (kept alive by the returned guard).
pub fn store() -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("troupe.db")).unwrap();
    (dir, store)
}

/// Assert the database passes its integrity check and the store's invariants.
pub fn assert_sound(store: &SqliteStore) {
    let problems = store.verify().unwrap();
    assert!(problems.is_empty(), "{problems:#?}");
}
