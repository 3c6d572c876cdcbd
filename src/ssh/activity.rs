//! How many SSH operations a [`Pool`](super::Pool) has finished, well or
//! not (a connection made or refused, a script answered or timed out, an
//! upload): it moves while a round makes progress on its nodes, which is
//! what the daemon's `/healthz` watches during a round.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A shared counter of finished SSH operations.
#[derive(Clone, Debug, Default)]
pub struct Activity(Arc<AtomicU64>);

impl Activity {
    /// The operations finished so far.
    pub fn finished(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Awaits `operation`, then counts it, whatever its outcome.
    pub(super) async fn count<T>(&self, operation: impl Future<Output = T>) -> T {
        let output = operation.await;
        self.0.fetch_add(1, Ordering::Relaxed);
        output
    }
}
