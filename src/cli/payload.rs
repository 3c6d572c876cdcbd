//! `winfleet payload digest DIR`: the digest to pin in the Fleet's
//! `spec.payload.digest`, and the manifest it is computed over.

use std::path::PathBuf;
use std::process::ExitCode;

use winfleet::payload::Payload;

use super::output;

/// What to do with a payload directory.
#[derive(Debug, clap::Subcommand)]
pub enum PayloadCommand {
    /// Print the digest of a payload directory (first line, `sha256:<hex>`, the value for the Fleet's
    /// spec.payload.digest), then the manifest it covers (`<sha256>  <path>` per file). WMCO's
    /// `.tar.gz` entries are read as the file inside; entries left out are noted on stderr.
    Digest {
        /// The payload directory (such as a copy of WMCO's image's /payload).
        dir: PathBuf,
    },
}

pub fn run(command: &PayloadCommand) -> anyhow::Result<ExitCode> {
    match command {
        PayloadCommand::Digest { dir } => {
            let payload = Payload::load(dir)?;
            for skipped in &payload.skipped {
                output::warn(&format!("note: {} is not part of the payload: {}", skipped.path, skipped.reason));
            }
            match &payload.kubelet_version {
                Some(version) => output::warn(&format!(
                    "note: the payload's kubelet is {version} (its build information): the version skew with the \
                     API server is judged by it"
                )),
                None => output::warn(
                    "note: the payload's kubelet says no version (no kubelet, or no \
                     k8s.io/component-base/version.gitVersion in its build information): declare it in the Fleet's \
                     spec.payload.kubeletVersion, or the version skew is not checked",
                ),
            }
            output::out(&format!("{}\n{}", payload.digest, payload.manifest));
            Ok(ExitCode::SUCCESS)
        }
    }
}
