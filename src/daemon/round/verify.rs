//! Whether a new head may be applied when signatures are required
//! (`--trusted-keys`, [`crate::source::signed`]).
//!
//! With `--verify-mode all-since-last-applied` the commits checked start
//! after the last applied revision. The daemon knows it once it applied a
//! revision; until then (a restart, a leader handover: the cache is an
//! emptyDir) it reads it back: the revision `--verify-since` names, else
//! the one the status branch records, accepted only as a signed ancestor
//! of the head. A status branch that records none means nothing was ever
//! applied, so the whole history is checked; one that cannot be read means
//! nothing is applied (issue 23: checking only the head there let a signed
//! merge bring in an unsigned commit).
//!
//! The status branch is the one the head's Fleet configures, and
//! winfleet's own status commits are passed over in every mode
//! ([`StatusCommits`], issue 35): with the status on the tracked branch
//! they land between the signed commits. There the record is not believed
//! either: whoever pushes the configuration could write it, so after a
//! restart the whole history is checked unless `--verify-since` names
//! where to start.

use git2::Oid;

use super::Daemon;
use crate::cluster::events::{Events, Reason, Regarding};
use crate::daemon::report::Recorded;
use crate::daemon::source::short;
use crate::desired::Loaded;
use crate::desired::model::FleetSettings;
use crate::source::signed::{Policy, Range, StatusCommits, VerifyMode};

/// Where `--verify-since` comes from, in messages.
const FROM_FLAG: &str = "--verify-since";
/// Where the status branch's record comes from, in messages.
const FROM_STATUS: &str = "the status branch's lastAppliedRevision";
/// What a daemon that cannot read where the check starts does.
const UNTIL_READ: &str = "with --verify-mode all-since-last-applied nothing is applied until the status branch can be \
                          read or --verify-since names the last applied revision";
/// What a daemon that must not start the check where it was told does.
const UNTIL_NAMED: &str =
    "with --verify-mode all-since-last-applied nothing is applied until --verify-since names the last applied revision";

/// A head that may not be applied.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Refusal {
    /// Why, for status (`signature: …`).
    pub why: String,
    /// Not the head's fault (a read failed): checked again at the next poll.
    pub retry: bool,
}

/// Where the commits checked start when nothing was applied in this
/// process yet.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Start {
    /// After this revision (`from` says who named it); still to be checked
    /// as a signed ancestor of the head.
    After {
        /// The revision.
        revision: String,
        /// `--verify-since`, or the status branch.
        from: &'static str,
    },
    /// The whole history: nothing was ever applied, or the record cannot
    /// be believed; why.
    History(String),
    /// Unknown: nothing may be applied; why.
    Unknown(String),
}

/// Where the check starts when the status branch says `recorded` (read
/// only without `--verify-since`). Pure.
pub(super) fn start(recorded: Result<Recorded, String>) -> Start {
    match recorded {
        Ok(Recorded { revision: Some(revision), only_status: true, .. }) => {
            Start::After { revision, from: FROM_STATUS }
        }
        Ok(Recorded { revision: Some(_), only_status: false, branch }) => Start::History(format!(
            "the status branch {branch} also holds the configuration, so whoever pushes there could write its \
             lastAppliedRevision: every commit of the history but winfleet's status commits must be signed \
             (--verify-since names where to start)"
        )),
        Ok(Recorded { revision: None, branch, .. }) => Start::History(format!(
            "the status branch {branch} records no applied revision: every commit of the history must be signed"
        )),
        Err(e) => Start::Unknown(format!("the last applied revision cannot be read back from the status branch ({e})")),
    }
}

/// Where the head being verified puts its status: its Fleet's settings
/// (the defaults when it is invalid) and the directory its loader skips.
#[derive(Clone, Debug)]
pub(super) struct HeadStatus {
    /// The status branch and directory, as winfleet writes them.
    pub fleet: FleetSettings,
    /// The directory the loader skipped.
    pub skipped: String,
}

impl HeadStatus {
    /// The head's, from its load.
    pub fn of(loaded: &Loaded) -> Self {
        let fleet = loaded.desired.as_ref().map(|d| d.fleet.clone()).unwrap_or_default();
        Self { fleet, skipped: loaded.status_path.clone() }
    }
}

impl Default for HeadStatus {
    fn default() -> Self {
        Self { fleet: FleetSettings::default(), skipped: crate::desired::DEFAULT_STATUS_PATH.to_owned() }
    }
}

impl Daemon {
    /// Why `revision` may not be applied when signatures are required;
    /// None when it is trusted or none are required.
    pub(super) async fn untrusted(&mut self, revision: &str) -> Option<Refusal> {
        let policy = self.config.verify.clone()?;
        let range = match self.range(&policy, revision).await {
            Ok(range) => range,
            Err(refusal) => {
                self.publish_refusal(revision, &refusal.why).await;
                return Some(refusal);
            }
        };
        let (keys, rev, status) = (policy.keys, revision.to_owned(), self.status_commits());
        match self.git("verifying signatures", move |source| source.verify(&keys, &rev, range, &status)).await {
            Ok(Ok(signers)) => {
                tracing::info!(revision = %short(revision), signed_by = %signers.join(", "), "signature verified");
                None
            }
            Ok(Err(why)) => {
                let why = format!("signature: {why}");
                self.publish_refusal(revision, &why).await;
                Some(Refusal { why, retry: false })
            }
            Err(e) => Some(Refusal { why: format!("signature: cannot be verified: {e}"), retry: true }),
        }
    }

    /// The commits to check up to `revision`.
    async fn range(&mut self, policy: &Policy, revision: &str) -> Result<Range, Refusal> {
        if policy.mode == VerifyMode::Head {
            return Ok(Range::Head);
        }
        if let Some(id) = self.verified_since.as_deref().and_then(|r| Oid::from_str(r).ok()) {
            return Ok(Range::Since(id));
        }
        // The admin's word comes first: --verify-since is how a daemon that
        // cannot read the status branch (or must not believe it) is told.
        // The status branch is read where the head's Fleet puts it (the
        // head was loaded, not applied: loading is pure).
        let start = match &policy.since {
            Some(revision) => Start::After { revision: revision.clone(), from: FROM_FLAG },
            None => start(self.status.read_last_applied(&self.head_status.fleet).await),
        };
        let (base, from) = match start {
            Start::After { revision, from } => (revision, from),
            Start::History(why) => {
                tracing::warn!("{why}");
                return Ok(Range::History);
            }
            Start::Unknown(why) => {
                return Err(Refusal { why: format!("signature: {why}; {UNTIL_READ}"), retry: true });
            }
        };
        let (keys, head, status) = (policy.keys.clone(), revision.to_owned(), self.status_commits());
        let checked = self
            .git("checking the last applied revision", move |source| {
                source.check_base(&keys, &head, &base, from, &status)
            })
            .await;
        match checked {
            Ok(Ok(id)) => {
                tracing::info!(since = %short(&id.to_string()), %from, "signatures are checked after the last applied revision");
                self.verified_since = Some(id.to_string());
                Ok(Range::Since(id))
            }
            Ok(Err(why)) => Err(Refusal { why: format!("signature: {why}; {UNTIL_NAMED}"), retry: false }),
            Err(e) => Err(Refusal { why: format!("signature: cannot be verified: {e}"), retry: true }),
        }
    }

    /// How winfleet's own status commits are told, for the head in hand.
    fn status_commits(&self) -> StatusCommits {
        StatusCommits {
            path: self.head_status.skipped.clone(),
            selected: self.config.path.clone(),
            author_name: self.config.author_name.clone(),
            author_email: self.config.author_email.clone(),
        }
    }

    /// A `RevisionUntrusted` Event on the daemon's Pod.
    async fn publish_refusal(&self, revision: &str, why: &str) {
        if let (Some(cluster), Some((namespace, pod))) = (&self.cluster, &self.config.pod) {
            let why = why.strip_prefix("signature: ").unwrap_or(why);
            let note = format!("revision {} is not applied: {why}", short(revision));
            Events::with_backlog(cluster.client.clone(), self.events.clone())
                .publish(Regarding::Pod(namespace, pod), Reason::RevisionUntrusted, note)
                .await;
        }
    }

    /// Whether `revision`, read back from the status branch to stay in
    /// force, is signed by a trusted key (when keys are required): the
    /// status branch alone must not put a revision in force, nor a record
    /// on a branch that also holds the configuration (whoever pushes there
    /// could have named any signed revision, one that brought in an
    /// unsigned commit included).
    pub(super) async fn trusted_in_force(&self, revision: &str) -> bool {
        let Some(policy) = self.config.verify.clone() else { return true };
        match self.status.read_last_applied(&self.head_status.fleet).await {
            Ok(recorded) if recorded.only_status => {}
            Ok(recorded) => {
                tracing::warn!(branch = %recorded.branch, "the status branch also holds the configuration, so its lastAppliedRevision is not kept in force");
                return false;
            }
            Err(why) => {
                tracing::warn!(%why, "the last applied revision cannot be read back; nothing is in force");
                return false;
            }
        }
        let (rev, status) = (revision.to_owned(), self.status_commits());
        match self.git("verifying signatures", move |source| source.check_signed(&policy.keys, &rev, &status)).await {
            Ok(Ok(())) => true,
            Ok(Err(why)) | Err(why) => {
                tracing::warn!(revision = %short(revision), %why, "the last applied revision the status branch records is not trusted; nothing is in force");
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded(revision: Option<&str>, only_status: bool) -> Result<Recorded, String> {
        Ok(Recorded { revision: revision.map(str::to_owned), branch: "winfleet/status".into(), only_status })
    }

    #[test]
    fn the_status_branchs_record_starts_the_check_and_no_record_means_the_whole_history() {
        let after = start(recorded(Some("4b825dc"), true));
        assert_eq!(after, Start::After { revision: "4b825dc".into(), from: FROM_STATUS });
        assert!(matches!(start(recorded(None, true)), Start::History(_)));
    }

    #[test]
    fn issue_35_a_record_on_a_branch_that_also_holds_the_configuration_does_not_start_the_check() {
        let Start::History(why) = start(recorded(Some("4b825dc"), false)) else { panic!("the whole history") };
        assert!(why.contains("also holds the configuration") && why.contains("--verify-since"), "{why}");
    }

    #[test]
    fn issue_23_a_status_branch_that_cannot_be_read_leaves_the_start_unknown_and_says_why() {
        let Start::Unknown(why) = start(Err("no status remote is configured".into())) else { panic!("unknown") };
        assert_eq!(
            why,
            "the last applied revision cannot be read back from the status branch (no status remote is configured)"
        );
    }
}
