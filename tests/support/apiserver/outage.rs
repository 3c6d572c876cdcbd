//! The API server going away and its clients' requests meeting a changed
//! world: [`ApiServer::set_down`] makes every request of the in-process
//! client fail as an unreachable server does (a transport error, never an
//! HTTP answer: kube returns `Error::Service`, which no retry policy
//! retries; over loopback HTTP it is a 503), and
//! [`ApiServer::before_request`] runs a test's closure before a request is
//! served (a kubelet's heartbeat landing between two of winfleet's calls).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::ApiServer;

/// A closure run before each request: (server, method, path and query).
pub(crate) type BeforeHook = dyn Fn(&ApiServer, &str, &str) + Send + Sync;

/// What makes the server unreachable or runs before requests.
#[derive(Default)]
pub(crate) struct Outage {
    down: Arc<AtomicBool>,
    before: Mutex<Vec<Arc<BeforeHook>>>,
}

impl Outage {
    pub(crate) fn is_down(&self) -> bool {
        self.down.load(Ordering::SeqCst)
    }

    pub(crate) fn hooks(&self) -> Vec<Arc<BeforeHook>> {
        self.before.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl ApiServer {
    /// Takes the server away (`true`: every request fails as a connection
    /// to a dead server does) or brings it back (`false`).
    pub fn set_down(&self, down: bool) {
        self.outage.down.store(down, Ordering::SeqCst);
    }

    /// The switch of [`Self::set_down`], for an admission hook (which must
    /// not call back into the server): storing `true` takes it away.
    pub fn down_switch(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.outage.down)
    }

    /// Runs `hook` before each request is served, with the server, the
    /// method and the path with its query (outside the store lock: it may
    /// call [`Self::update`]).
    pub fn before_request(&self, hook: impl Fn(&ApiServer, &str, &str) + Send + Sync + 'static) {
        self.outage.before.lock().unwrap_or_else(|e| e.into_inner()).push(Arc::new(hook));
    }
}
