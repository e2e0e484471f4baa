//! What every handler shares: the project's paths, the store, the config the
//! server started with, the token rule, and the wake-up of event streams.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use troupe_core::config::Config;
use troupe_core::layout::Layout;
use troupe_store::Store;

use crate::auth::Auth;
use crate::error::{ApiError, ApiResult};
use crate::feed::EventFeed;
use crate::rest::listing::ListingCache;

/// The shared state of one server. Cheap to clone (one `Arc`).
#[derive(Clone)]
pub struct AppState {
    shared: Arc<Shared>,
}

struct Shared {
    layout: Layout,
    store: Arc<dyn Store>,
    config: Config,
    auth: Auth,
    events: EventFeed,
    closing: CancellationToken,
    listings: ListingCache,
}

impl AppState {
    /// The state of a server over the project at `layout`, with its `store`
    /// and `config` (as loaded by the one loader), answering requests by `auth`.
    pub fn new(layout: Layout, store: Arc<dyn Store>, config: Config, auth: Auth) -> Self {
        let events = EventFeed::new(store.clone());
        let closing = CancellationToken::new();
        AppState {
            shared: Arc::new(Shared { layout, store, config, auth, events, closing, listings: Default::default() }),
        }
    }

    /// The project's paths.
    pub fn layout(&self) -> &Layout {
        &self.shared.layout
    }

    /// The project's store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.shared.store
    }

    /// `.troupe/config.toml` as it was when the server started. Endpoints that
    /// change the file read it again rather than trusting this copy.
    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    /// Who may make requests.
    pub fn auth(&self) -> &Auth {
        &self.shared.auth
    }

    /// The wake-up of everything that follows the store's event log (SSE, A2A
    /// streaming): it sees commits of every process, not only this one.
    pub fn events(&self) -> &EventFeed {
        &self.shared.events
    }

    /// Cancelled when the server shuts down: long-lived answers (event
    /// streams) end on it, so a graceful shutdown does not wait for clients.
    pub fn closing(&self) -> &CancellationToken {
        &self.shared.closing
    }

    /// The board listing's last answers (`GET /tasks/board`).
    pub(crate) fn listings(&self) -> &ListingCache {
        &self.shared.listings
    }

    /// Run `f` on the store on a blocking thread (the store is synchronous),
    /// turning its error into the API's. Every write also wakes the event feed,
    /// so this process's own changes reach its streams without waiting for a poll.
    pub async fn with_store<T, F>(&self, f: F) -> ApiResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&dyn Store) -> Result<T, ApiError> + Send + 'static,
    {
        let store = self.shared.store.clone();
        let result = tokio::task::spawn_blocking(move || f(store.as_ref()))
            .await
            .map_err(|e| ApiError::internal(format!("store task failed: {e}")))?;
        self.shared.events.poke();
        result
    }
}
