//! Progress of the long steps of a round (cordon, drain, reboot, the wait
//! for Ready, joins, each node's result) as tracing events under one
//! target, [`TARGET`], with the fields `node` and `phase` and a message.
//!
//! The IO shell emits them where it acts or waits; whoever runs the round
//! chooses how to show them: `apply --once` draws them on stderr (a spinner
//! per node on a terminal, plain lines with the elapsed time otherwise), the
//! daemon and `--log-format json` log them like any other event. Pure code
//! never emits them, and a message never carries a secret.

use std::time::Duration;

/// The tracing target of every progress event.
pub const TARGET: &str = "winfleet::progress";

/// Which step a node is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Its Node is being cordoned.
    Cordon,
    /// Its pods are being evicted (the message names the pod waited for).
    Drain,
    /// The reboot command was sent.
    Reboot,
    /// Waiting for a new boot and a Ready Node.
    WaitReady,
    /// A joining node: CSRs, registration, services.
    Join,
    /// Files, environment or services are being changed over SSH.
    Node,
    /// The node's part of the round ended well.
    Done,
    /// The node's part of the round failed (logged at WARN).
    Failed,
}

impl Phase {
    /// The phase's name in events: `cordon`, `drain`, `reboot`,
    /// `waitReady`, `join`, `node`, `done`, `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Cordon => "cordon",
            Phase::Drain => "drain",
            Phase::Reboot => "reboot",
            Phase::WaitReady => "waitReady",
            Phase::Join => "join",
            Phase::Node => "node",
            Phase::Done => "done",
            Phase::Failed => "failed",
        }
    }

    /// Whether the node's part of the round is over.
    pub fn is_final(self) -> bool {
        matches!(self, Phase::Done | Phase::Failed)
    }
}

/// Reports that `node` (a Node name, or an address before it has one) is
/// in `phase`; a failure at WARN, the rest at INFO.
pub fn step(node: &str, phase: Phase, message: &str) {
    let name = phase.as_str();
    if phase == Phase::Failed {
        tracing::warn!(target: TARGET, node, phase = name, "{message}");
    } else {
        tracing::info!(target: TARGET, node, phase = name, "{message}");
    }
}

/// "1m05s", "12s", "0.4s": how long something took, for humans.
pub fn elapsed(duration: Duration) -> String {
    let secs = duration.as_secs();
    match secs {
        0..10 => format!("{:.1}s", duration.as_secs_f64()),
        10..60 => format!("{secs}s"),
        _ => format!("{}m{:02}s", secs / 60, secs % 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elapsed_time_reads_in_seconds_then_minutes() {
        assert_eq!(elapsed(Duration::from_millis(400)), "0.4s");
        assert_eq!(elapsed(Duration::from_secs(12)), "12s");
        assert_eq!(elapsed(Duration::from_secs(65)), "1m05s");
    }
}
