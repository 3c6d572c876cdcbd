//! The PowerShell dialect's exchange pattern over the same relays
//! (issue 30, point 3): no Windows host runs here, so each node gets a
//! posix stand-in for `powershell.exe -Command -`
//! (tests/support/powershell_standin.rs) that reads exactly the lines the
//! PowerShell dialect sends (each script one wrapped line, then the end
//! line) and runs the posix observation inside them. Three patterns, each
//! on its own pool, warm (after one round that opens what it keeps), the
//! round's parallelism, the median of 5 rounds:
//!
//! - posix: the node's kept `/bin/sh -s`;
//! - PowerShell now: the node's kept `powershell.exe -Command -` session;
//! - PowerShell before 2026-11-26: a channel (and on Windows a new
//!   powershell.exe) per script.
//!
//! Each row also gives what the pool counted per node and round:
//! connections, channels and scripts. The stand-in starts in a millisecond;
//! powershell.exe takes a few hundred, which the pattern before paid per
//! script and the kept session pays once.

use std::time::{Duration, Instant};

use futures::StreamExt as _;
use winfleet::desired::model::{Desired, Instance};
use winfleet::dialect::{self, Script, powershell};
use winfleet::engine;
use winfleet::ssh::{Pool, Traffic};
use winfleet::vocab::Shell;

use super::median;

/// How one node's observation travels.
#[derive(Clone, Copy)]
pub(super) enum Pattern {
    /// A script sent to the node's kept shell, of this dialect.
    Kept(Shell),
    /// A channel of its own.
    ChannelPerScript,
}

/// The observation script of `instance` (posix text), as `shell`'s
/// dialect frames a script: in the PowerShell wrapping for the stand-in.
fn observation(instance: &Instance, shell: Shell) -> Script {
    let script = dialect::observe(&instance.spec, None);
    match shell {
        Shell::Posix => script,
        Shell::Powershell => Script { command: powershell::COMMAND, input: powershell::wrap(&script.input) },
    }
}

async fn one_node(pool: &Pool, instance: &Instance, pattern: Pattern) -> Result<(), String> {
    let target = engine::target(instance);
    let output = match pattern {
        Pattern::Kept(shell) => {
            let mut kept = pool.converse(&target, dialect::interpreter(shell)).await.map_err(|e| e.to_string())?;
            let output = pool.exchange(&mut kept, &observation(instance, shell), true).await;
            pool.keep(kept).await;
            output
        }
        Pattern::ChannelPerScript => pool.run(&target, &observation(instance, Shell::Powershell), true).await,
    }
    .map_err(|e| e.to_string())?;
    winfleet::node::facts::parse_facts(&output.stdout)
        .map(|_| ())
        .map_err(|e| format!("{e}: {}", String::from_utf8_lossy(&output.stderr)))
}

/// One round of observations on every node; its time and traffic.
async fn round(pool: &Pool, desired: &Desired, pattern: Pattern) -> (Duration, Traffic) {
    let before = pool.activity.traffic();
    let start = Instant::now();
    let failures: Vec<String> = futures::stream::iter(desired.instances.values())
        .map(|instance| one_node(pool, instance, pattern))
        .buffer_unordered(desired.fleet.max_parallel as usize)
        .filter_map(|r| std::future::ready(r.err()))
        .collect()
        .await;
    assert!(failures.is_empty(), "{} nodes failed, first: {}", failures.len(), failures[0]);
    (start.elapsed(), pool.activity.traffic() - before)
}

/// The pattern's cold round (connections and what it keeps) and its warm
/// rounds' median, with the warm traffic per node.
pub(super) async fn measure(pool: Pool, desired: &Desired, pattern: Pattern) -> (Duration, Duration, [f64; 3]) {
    let (cold, _) = round(&pool, desired, pattern).await;
    let mut times = Vec::new();
    let mut traffic = Traffic::default();
    for _ in 0..5 {
        let (took, t) = round(&pool, desired, pattern).await;
        times.push(took);
        traffic = t;
    }
    pool.close().await;
    let n = desired.instances.len().max(1) as f64;
    let per_node = [traffic.connections as f64 / n, traffic.channels as f64 / n, traffic.scripts as f64 / n];
    (cold, median(times), per_node)
}
