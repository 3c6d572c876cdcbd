//! The report stage: after each round, render the status files (pure, in
//! [`crate::status`]) and commit them to the status branch when their bytes
//! changed (push with fetch-and-rebuild on a non-fast-forward).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use git2::Repository;

use super::Config;
use super::source::Source;
use super::source::{GIT_TIMEOUT, short};
use crate::desired::model::{Desired, FleetSettings};
use crate::engine::report::NodeResult;
use crate::reconcile::left_configured::LeftProbe;
use crate::reconcile::report::RoundReport;
use crate::source::transport::GitAuth;
use crate::status::publish::{self, Published, StatusCommit, StatusTarget};
use crate::status::{self, RoundInput, Status};

/// The last applied revision a status branch records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    /// The revision; None when it records none.
    pub revision: Option<String>,
    /// The branch it was read from.
    pub branch: String,
    /// Whether the branch holds nothing but status: false when it also
    /// holds the configuration (the status on the tracked branch), where
    /// whoever pushes the configuration could write the record too.
    pub only_status: bool,
}

/// Writes status after each round and remembers the last one written.
pub struct StatusWriter {
    /// The repository status commits are built in.
    repo_dir: PathBuf,
    url: Option<String>,
    auth: GitAuth,
    author_name: String,
    author_email: String,
    /// The pull secret's credentials, in every form they could leak in.
    pull_secret: Vec<String>,
    /// Those and the current git token.
    secrets: Vec<String>,
    /// The status as last rendered, and the (branch, path) it belongs to.
    previous: Option<(String, String, Status)>,
    /// Drift corrected in rounds whose status could not be pushed, by
    /// instance and MachineSet: carried into every status until one lands,
    /// so no correction goes unrecorded on the branch.
    unpushed: Unpushed,
    /// Instances the last round written found drifted (its status lists
    /// their drift), for the metric: the same verdict, whatever the round.
    drifted: u64,
    /// This round's check of the hosts left configured, for the next write.
    left: Option<LeftProbe>,
    /// Where status goes while nothing is in force: the newest head's
    /// Fleet settings (the defaults until a head is loaded).
    unapplied: FleetSettings,
}

/// Drift entries of statuses not pushed yet.
#[derive(Debug, Default)]
struct Unpushed {
    instances: BTreeMap<String, Vec<String>>,
    machine_sets: BTreeMap<String, Vec<String>>,
}

impl Unpushed {
    /// Adds what `status` records as corrected.
    fn remember(&mut self, status: &Status) {
        let drifted = |from: &mut BTreeMap<String, Vec<String>>, name: &String, drift: &[String]| {
            if !drift.is_empty() {
                from.insert(name.clone(), drift.to_vec());
            }
        };
        for (address, instance) in &status.instances {
            drifted(&mut self.instances, address, &instance.drift);
        }
        for (name, set) in &status.machine_sets {
            drifted(&mut self.machine_sets, name, &set.drift);
        }
    }

    /// Puts the unpushed corrections into `status` (for objects it still
    /// lists), ahead of what this round found.
    fn carry_into(&self, status: &mut Status) {
        fn merge(drift: &mut Vec<String>, earlier: &[String]) {
            let mut merged = earlier.to_vec();
            merged.extend(drift.drain(..).filter(|d| !earlier.contains(d)));
            *drift = merged;
        }
        for (address, earlier) in &self.instances {
            if let Some(instance) = status.instances.get_mut(address) {
                merge(&mut instance.drift, earlier);
            }
        }
        for (name, earlier) in &self.machine_sets {
            if let Some(set) = status.machine_sets.get_mut(name) {
                merge(&mut set.drift, earlier);
            }
        }
    }
}

impl StatusWriter {
    /// A writer for the daemon's configuration; without a status URL the
    /// status is kept in memory (metrics) and not pushed.
    pub fn new(config: &Config, source: &Source) -> Self {
        let url = config.status_url.clone().or_else(|| source.default_status_url());
        if url.is_none() {
            tracing::warn!(
                "no status remote (no --status-repo-url and the checkout has no origin): status is not written to Git"
            );
        }
        let pull_secret = config.pull_secret.as_ref().map(|s| s.secret_values()).unwrap_or_default();
        let mut writer = Self {
            repo_dir: config.cache_dir.join("status.git"),
            url,
            auth: config.auth.clone(),
            author_name: config.author_name.clone(),
            author_email: config.author_email.clone(),
            pull_secret,
            secrets: Vec::new(),
            previous: None,
            unpushed: Unpushed::default(),
            drifted: 0,
            left: None,
            unapplied: FleetSettings::default(),
        };
        writer.refresh_secrets();
        writer
    }

    /// Re-reads the git token (a rotated Secret's new token is redacted too).
    pub fn refresh_secrets(&mut self) {
        self.secrets.clone_from(&self.pull_secret);
        // The cluster's pull secret as last read (a rotation included).
        self.secrets.extend(crate::cluster::pull_secret::secret_values());
        let token = self.auth.token_file.as_ref().and_then(|p| std::fs::read_to_string(p).ok());
        if let Some(token) = token.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty()) {
            self.secrets.push(token);
        }
    }

    /// Renders this round's status and commits it when it changed; the
    /// status commit, if one was made.
    pub async fn write(
        &mut self,
        attempted: &str,
        applied: Option<(String, Arc<Desired>)>,
        invalid: &[String],
        report: Option<&RoundReport>,
        drift_check: bool,
        suspended_by: Option<&str>,
    ) -> Option<String> {
        // The round may have read a rotated pull secret from the cluster.
        self.refresh_secrets();
        let unapplied = self.unapplied.clone();
        let fleet = applied.as_ref().map_or(&unapplied, |(_, d)| &d.fleet);
        let target = self.target(fleet);
        let previous = self.previous(&target).await;
        let instances: Vec<String> = applied.iter().flat_map(|(_, d)| d.instances.keys().cloned()).collect();
        let machine_sets: Vec<String> = applied.iter().flat_map(|(_, d)| d.machine_sets.keys().cloned()).collect();
        let input = RoundInput {
            now: jiff::Timestamp::now(),
            attempted,
            applied: applied.as_ref().map(|(revision, _)| revision.as_str()),
            invalid,
            instances: &instances,
            machine_sets: &machine_sets,
            report,
            drift_check,
            drift_mode: fleet.drift_mode,
            secrets: &self.secrets,
            suspended_by,
        };
        let mut next = status::render(&previous, &input);
        status::left::keep(&previous, &mut next, self.left.take().as_ref(), &instances, input.now, &self.secrets);
        self.drifted = drifted(report, &next);
        self.unpushed.carry_into(&mut next);
        let commit = StatusCommit { files: status::to_files(&next), message: status::commit_message(attempted, &next) };
        self.previous = Some((target.branch.clone(), target.path.clone(), next));
        if target.url.is_empty() {
            return None;
        }
        let branch = target.branch.clone();
        let result =
            self.blocking(move |repo| publish::publish(repo, &target, &commit).map_err(|e| e.to_string())).await;
        match result {
            Ok(Published::Unchanged) => {
                self.unpushed = Unpushed::default();
                None
            }
            Ok(Published::Committed { commit, attempts }) => {
                tracing::info!(commit = %short(&commit), branch = %branch, attempts, "status committed");
                self.unpushed = Unpushed::default();
                Some(commit)
            }
            Err(e) => {
                tracing::warn!(error = %e, branch = %branch, "cannot write status; the next round tries again");
                if let Some((_, _, status)) = &self.previous {
                    self.unpushed.remember(status);
                }
                None
            }
        }
    }

    /// Where status goes while nothing is in force (a restart on a head
    /// that may not be applied): where `fleet`, the head's, puts it.
    pub fn place_unapplied(&mut self, fleet: &FleetSettings) {
        self.unapplied = fleet.clone();
    }

    /// The revision the status branch says was applied last.
    pub async fn last_applied(&mut self, fleet: &FleetSettings) -> Option<String> {
        let target = self.target(fleet);
        self.previous(&target).await.summary.last_applied_revision
    }

    /// The revision the status branch says was applied last, read from Git
    /// (a status rendered and not pushed says nothing): Ok with no revision
    /// when it records none (or does not exist yet), Err when it cannot be
    /// read (no status remote, the remote unreachable), never a guess.
    pub async fn read_last_applied(&self, fleet: &FleetSettings) -> Result<Recorded, String> {
        let target = self.target(fleet);
        if target.url.is_empty() {
            return Err("no status remote is configured".to_owned());
        }
        let branch = target.branch.clone();
        let read = self.blocking(move |repo| publish::read_branch(repo, &target).map_err(|e| e.to_string())).await;
        let read = read.map_err(|e| format!("cannot read the status branch {branch}: {e}"))?;
        let revision = status::from_files(&read.files).summary.last_applied_revision;
        Ok(Recorded { revision, branch, only_status: read.only_status })
    }

    /// The revision last applied to an instance without failure, as the
    /// status last rendered says.
    pub fn applied_revision(&self, address: &str) -> Option<&str> {
        let (_, _, status) = self.previous.as_ref()?;
        status.instances.get(address)?.applied_revision.as_deref()
    }

    /// The hosts to check for what winfleet left on them: instances of the
    /// last status (read from Git after a restart) no longer `listed`.
    pub async fn left_candidates(&mut self, fleet: &FleetSettings, listed: &[String]) -> Vec<String> {
        let target = self.target(fleet);
        status::left::candidates(&self.previous(&target).await, listed)
    }

    /// What this round found on those hosts, for the status it writes.
    pub fn set_left(&mut self, probe: LeftProbe) {
        self.left = Some(probe);
    }

    /// Instances the last round written found drifted.
    pub fn drifted(&self) -> u64 {
        self.drifted
    }

    /// The strings no log line or status file may contain.
    pub fn secrets(&self) -> &[String] {
        &self.secrets
    }

    /// Instances and MachineSets by phase, as last rendered.
    pub fn phase_counts(&self) -> Option<BTreeMap<String, u64>> {
        self.previous.as_ref().map(|(_, _, status)| phase_counts(status))
    }

    fn target(&self, fleet: &FleetSettings) -> StatusTarget {
        StatusTarget {
            url: self.url.clone().unwrap_or_default(),
            auth: self.auth.clone(),
            branch: fleet.status_branch.clone(),
            path: fleet.status_path.clone(),
            author_name: self.author_name.clone(),
            author_email: self.author_email.clone(),
        }
    }

    /// The status last written to this target: from memory, or read from
    /// Git once (so transition times survive a restart).
    async fn previous(&mut self, target: &StatusTarget) -> Status {
        if let Some((branch, path, status)) = &self.previous
            && *branch == target.branch
            && *path == target.path
        {
            return status.clone();
        }
        if target.url.is_empty() {
            return Status::default();
        }
        let target = target.clone();
        match self.blocking(move |repo| publish::read_current(repo, &target).map_err(|e| e.to_string())).await {
            Ok(files) => status::from_files(&files),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the previous status; starting afresh");
                Status::default()
            }
        }
    }

    /// Runs `f` on the status cache repository off the async threads,
    /// bounded by [`GIT_TIMEOUT`].
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Repository) -> Result<T, String> + Send + 'static,
    ) -> Result<T, String> {
        let dir = self.repo_dir.clone();
        let work = tokio::task::spawn_blocking(move || {
            let repo =
                Repository::open(&dir).or_else(|_| Repository::init_bare(&dir)).map_err(|e| e.message().to_owned())?;
            f(&repo)
        });
        match tokio::time::timeout(GIT_TIMEOUT, work).await {
            Ok(Ok(result)) => result,
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("took longer than {}s", GIT_TIMEOUT.as_secs())),
        }
    }
}

/// Instances `report` processed whose `status` (just rendered, before
/// earlier unpushed drift is carried in) lists drift.
fn drifted(report: Option<&RoundReport>, status: &Status) -> u64 {
    let processed = report.into_iter().flat_map(|r| &r.nodes).filter(|n| !matches!(n.result, NodeResult::Pending));
    let drifted = processed.filter(|n| status.instances.get(&n.address).is_some_and(|i| !i.drift.is_empty()));
    drifted.count() as u64
}

/// Instances by phase (`ready`, `failed`, …), zeros included.
fn phase_counts(status: &Status) -> BTreeMap<String, u64> {
    let counts = serde_json::to_value(status.summary.instances).unwrap_or_default();
    let fields = counts.as_object().into_iter().flatten();
    fields.filter_map(|(phase, n)| Some((phase.clone(), n.as_u64()?))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::model::InstanceStatus;

    fn status(drift: &[(&str, &[&str])]) -> Status {
        let mut status = Status::default();
        for (address, entries) in drift {
            let instance = InstanceStatus {
                address: (*address).to_owned(),
                drift: entries.iter().map(|e| (*e).to_owned()).collect(),
                ..InstanceStatus::default()
            };
            status.instances.insert((*address).to_owned(), instance);
        }
        status
    }

    #[test]
    fn corrections_not_pushed_are_carried_until_a_status_lands() {
        let mut unpushed = Unpushed::default();
        unpushed.remember(&status(&[("10.0.0.1", &["write hosts.toml"]), ("10.0.0.2", &[])]));
        unpushed.remember(&status(&[("10.0.0.3", &["remove registry x"])]));
        let mut next = status(&[("10.0.0.1", &["set proxy", "write hosts.toml"]), ("10.0.0.2", &[])]);
        unpushed.carry_into(&mut next);
        let drift = |s: &Status, a: &str| s.instances[a].drift.clone();
        assert_eq!(drift(&next, "10.0.0.1"), ["write hosts.toml", "set proxy"]);
        assert!(drift(&next, "10.0.0.2").is_empty());
        assert!(!next.instances.contains_key("10.0.0.3"), "an instance no longer listed is not brought back");
    }
}
