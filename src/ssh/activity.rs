//! How many SSH operations a [`Pool`](super::Pool) has finished, well or
//! not (a connection made or refused, a script answered or timed out, an
//! upload): it moves while a round makes progress on its nodes, which is
//! what the daemon's `/healthz` watches during a round. Beside it, what
//! those operations cost on the wire ([`Traffic`]): connections, channels
//! and scripts, so a round's exchange pattern can be counted per node.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A shared counter of finished SSH operations, and their [`Traffic`].
#[derive(Clone, Debug, Default)]
pub struct Activity(Arc<Counters>);

#[derive(Debug, Default)]
struct Counters {
    finished: AtomicU64,
    connections: AtomicU64,
    channels: AtomicU64,
    scripts: AtomicU64,
}

/// What a pool asked of its nodes so far. A connection costs its handshake
/// (several round trips and a key exchange); a channel its open and its
/// exec or subsystem request (two round trips, and on the node a process);
/// a script sent to a kept shell one round trip.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// SSH connections made (handshake and authentication).
    pub connections: u64,
    /// Channels opened: a script's own, a kept shell's, an upload's SFTP.
    pub channels: u64,
    /// Scripts run, on their own channel or through a kept shell.
    pub scripts: u64,
}

impl std::ops::Sub for Traffic {
    type Output = Traffic;

    fn sub(self, earlier: Traffic) -> Traffic {
        Traffic {
            connections: self.connections.saturating_sub(earlier.connections),
            channels: self.channels.saturating_sub(earlier.channels),
            scripts: self.scripts.saturating_sub(earlier.scripts),
        }
    }
}

impl Activity {
    /// The operations finished so far.
    pub fn finished(&self) -> u64 {
        self.0.finished.load(Ordering::Relaxed)
    }

    /// The traffic so far.
    pub fn traffic(&self) -> Traffic {
        Traffic {
            connections: self.0.connections.load(Ordering::Relaxed),
            channels: self.0.channels.load(Ordering::Relaxed),
            scripts: self.0.scripts.load(Ordering::Relaxed),
        }
    }

    /// Awaits `operation`, then counts it, whatever its outcome.
    pub(super) async fn count<T>(&self, operation: impl Future<Output = T>) -> T {
        let output = operation.await;
        self.0.finished.fetch_add(1, Ordering::Relaxed);
        output
    }

    /// Counts a connection attempt that completed its handshake.
    pub(super) fn connected(&self) {
        self.0.connections.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a channel being opened (`script`: to run one script).
    pub(super) fn channel(&self, script: bool) {
        self.0.channels.fetch_add(1, Ordering::Relaxed);
        if script {
            self.0.scripts.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts a script sent to a kept shell.
    pub(super) fn exchange(&self) {
        self.0.scripts.fetch_add(1, Ordering::Relaxed);
    }
}
