//! What wakes the daemon. Every source of work (poll timer, webhook, file
//! watch, drift timer, cluster watch) sends a [`Trigger`] down
//! one channel; the loop coalesces whatever arrives during a round into one
//! follow-up round.

pub mod cluster_watch;
pub mod fs_watch;
pub mod git_sync;
pub mod schedule;
pub mod webhook;

use tokio::time::Instant;

/// One reason to run a round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// The poll interval elapsed: check the remote head.
    Poll,
    /// A verified push to the tracked branch arrived at the webhook.
    Webhook {
        /// When the request was accepted (for the merge → applied latency).
        received: Instant,
    },
    /// The watched checkout changed (git-sync flipped its symlink).
    FsChange,
    /// The drift interval elapsed: re-observe every node.
    Drift,
    /// `winfleet resume`: apply the revision in force now.
    Resumed,
    /// A Windows Node or Machine appeared in the cluster.
    ClusterChange {
        /// Its addresses (InternalIP, hostnames), to find its instance.
        addresses: Vec<String>,
    },
}

/// The sending end every trigger source holds.
pub type TriggerSender = tokio::sync::mpsc::UnboundedSender<Trigger>;
