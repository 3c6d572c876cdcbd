//! The payload a round runs with, from `--payload-dir`: read once, read
//! again when the directory changed (an init container refreshed it).

use std::path::PathBuf;
use std::sync::Arc;

use crate::lifecycle::PayloadState;
use crate::payload::Payload;

/// The payload last read.
pub struct PayloadCache {
    dir: Option<PathBuf>,
    loaded: Option<Arc<Payload>>,
}

impl PayloadCache {
    /// Nothing read yet from `dir` (`None`: no `--payload-dir`).
    pub fn new(dir: Option<PathBuf>) -> Self {
        Self { dir, loaded: None }
    }

    /// The payload for this round.
    pub async fn state(&mut self) -> PayloadState {
        let Some(dir) = self.dir.clone() else { return PayloadState::Missing };
        if let Some(payload) = self.loaded.clone() {
            let check = Arc::clone(&payload);
            if !tokio::task::spawn_blocking(move || check.is_stale()).await.unwrap_or(true) {
                return PayloadState::Loaded(payload);
            }
        }
        match tokio::task::spawn_blocking(move || Payload::load(&dir)).await {
            Ok(Ok(payload)) => {
                tracing::info!(digest = %payload.digest, files = payload.files.len(), "payload directory read");
                let payload = Arc::new(payload);
                self.loaded = Some(Arc::clone(&payload));
                PayloadState::Loaded(payload)
            }
            Ok(Err(e)) => {
                self.loaded = None;
                PayloadState::Failed(e.to_string())
            }
            Err(e) => PayloadState::Failed(format!("reading the payload directory stopped: {e}")),
        }
    }
}
