//! One client's view of the gateway: who it is (its identity, which rate
//! limits count against), the highest role it was started with (its ceiling),
//! its current role, and the channels to tell it that its tool list changed.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, RwLock};

use rmcp::service::SubscriptionSink;
use rmcp::{Peer, RoleServer};

/// A client connection's identity and role.
pub struct Session {
    /// The agent id: rate limits, the mailbox and the board use it.
    pub identity: String,
    /// The role the connection was started with; `set_role` never goes above it.
    pub ceiling: String,
    /// The feature the agent works on, when the Lead said so (`TROUPE_FEATURE`).
    pub feature: Option<String>,
    /// The task the agent works on, when the Lead said so (`TROUPE_TASK`).
    pub task: Option<String>,
    /// Delegate mode (seed 003 B5 `deny_file_locks`): file locks are refused
    /// whatever the role allows; the board and messages stay.
    pub delegate: bool,
    role: RwLock<String>,
    sinks: Mutex<Vec<SubscriptionSink>>,
    peers: Mutex<Vec<Peer<RoleServer>>>,
    visible: Mutex<Option<BTreeSet<String>>>,
    /// A change nobody could be told about yet: a `subscriptions/listen` that
    /// is acknowledged but not yet registered races with the change it wants
    /// to hear about, so the next subscriber is told at once.
    missed: AtomicBool,
}

impl Session {
    /// A session for `identity`, starting in (and capped at) `ceiling`.
    pub fn new(identity: impl Into<String>, ceiling: impl Into<String>) -> Session {
        let ceiling = ceiling.into();
        Session {
            identity: identity.into(),
            role: RwLock::new(ceiling.clone()),
            ceiling,
            feature: None,
            task: None,
            delegate: false,
            sinks: Mutex::new(Vec::new()),
            peers: Mutex::new(Vec::new()),
            visible: Mutex::new(None),
            missed: AtomicBool::new(false),
        }
    }

    /// The current role.
    pub fn role(&self) -> String {
        self.role.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub(crate) fn set_role(&self, role: &str) {
        *self.role.write().unwrap_or_else(|e| e.into_inner()) = role.to_string();
    }

    pub(crate) async fn add_sink(&self, sink: SubscriptionSink) {
        if self.missed.swap(false, Ordering::SeqCst) {
            // Level-triggered: an extra notification only makes the client list again.
            let _ = sink.notify_tool_list_changed().await;
        }
        self.sinks.lock().unwrap_or_else(|e| e.into_inner()).push(sink);
    }

    /// Remembers a peer that negotiated through `initialize` (protocol before
    /// 2026-07-28), which gets notifications directly rather than through a
    /// `subscriptions/listen` stream.
    pub(crate) fn remember_peer(&self, peer: &Peer<RoleServer>) {
        let Some(info) = peer.peer_info() else { return };
        if !info.protocol_version.has_initialize() {
            return;
        }
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        if peers.is_empty() {
            peers.push(peer.clone());
        }
    }

    /// Records `visible` as what the client was last shown; true when it
    /// differs from what it saw before (the first listing counts as no change).
    pub(crate) fn update_visible(&self, visible: BTreeSet<String>) -> bool {
        let mut last = self.visible.lock().unwrap_or_else(|e| e.into_inner());
        let changed = last.as_ref().is_some_and(|l| *l != visible);
        *last = Some(visible);
        changed
    }

    pub(crate) fn has_snapshot(&self) -> bool {
        self.visible.lock().unwrap_or_else(|e| e.into_inner()).is_some()
    }

    /// Sends `notifications/tools/list_changed` on every channel this client has.
    pub(crate) async fn notify_tools_changed(&self) {
        let sinks: Vec<SubscriptionSink> = std::mem::take(&mut *self.sinks.lock().unwrap_or_else(|e| e.into_inner()));
        let mut open = Vec::with_capacity(sinks.len());
        let mut told = false;
        for sink in sinks {
            match sink.notify_tool_list_changed().await {
                Ok(()) => {
                    told = true;
                    open.push(sink);
                }
                Err(e) => tracing::debug!("subscription closed: {e}"),
            }
        }
        self.sinks.lock().unwrap_or_else(|e| e.into_inner()).extend(open);
        let peers: Vec<Peer<RoleServer>> = self.peers.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for peer in peers {
            match peer.notify_tool_list_changed().await {
                Ok(()) => told = true,
                Err(e) => tracing::debug!("peer gone: {e}"),
            }
        }
        if !told {
            self.missed.store(true, Ordering::SeqCst);
        }
    }
}
