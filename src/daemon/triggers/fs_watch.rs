//! The file-system watch of a checkout maintained by someone else (a
//! git-sync sidecar volume): any change in the watched directories becomes
//! a [`Trigger::FsChange`]. The round then re-reads the checkout's HEAD and
//! only a new revision leads anywhere, so spurious events cost one cheap
//! check; bursts are coalesced by the schedule.

use std::path::PathBuf;

use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};

use crate::daemon::triggers::{Trigger, TriggerSender};

/// Starts watching; the watch lasts as long as the returned watcher lives.
pub fn watch(paths: &[PathBuf], triggers: TriggerSender) -> notify::Result<RecommendedWatcher> {
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| match event {
        Ok(event) if !matches!(event.kind, EventKind::Access(_)) => {
            let _ = triggers.send(Trigger::FsChange);
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "file watch error; the poll interval still checks the checkout"),
    })?;
    for path in paths {
        watcher.watch(path, RecursiveMode::NonRecursive)?;
    }
    Ok(watcher)
}
