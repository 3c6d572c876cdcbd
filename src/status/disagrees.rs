//! The summary's `ClusterDisagrees` condition (issue 27, item 4): `True`
//! with the fields that differ while the repository's Proxy or mirror sets
//! differ from the cluster's own objects; `False` once they agree again
//! (absent while they never differed). A round that could not read the
//! cluster's objects keeps what the last one found. Pure.

use super::model::{Condition, ConditionType};
use crate::cluster::disagree;
use crate::reconcile::report::ClusterReport;

/// The summary's conditions after a round (`cluster`: its cluster part).
pub fn conditions(previous: &[Condition], cluster: Option<&ClusterReport>, now: jiff::Timestamp) -> Vec<Condition> {
    let before = previous.iter().find(|c| c.kind == ConditionType::ClusterDisagrees);
    let compared = cluster.filter(|c| c.error.is_none() && c.sources_error.is_none());
    let Some(cluster) = compared else { return before.cloned().into_iter().collect() };
    let (status, reason, message) = if cluster.disagreements.is_empty() {
        if before.is_none() {
            return Vec::new();
        }
        (false, "AsExpected", "the repository's Proxy and mirror sets agree with the cluster's".to_owned())
    } else {
        let fields = disagree::fields(&cluster.disagreements);
        let message = format!(
            "the repository's values are applied to Windows nodes, and Linux nodes follow the cluster's; \
             these differ: {fields}"
        );
        (true, "RepositoryDiffers", message)
    };
    vec![Condition::after(previous, ConditionType::ClusterDisagrees, status, reason, message, now)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::disagree::Disagreement;

    fn report(fields: &[&str]) -> ClusterReport {
        let disagreements = fields
            .iter()
            .map(|f| Disagreement {
                object: "Proxy/cluster".into(),
                field: (*f).into(),
                repository: "a".into(),
                cluster: "b".into(),
            })
            .collect();
        ClusterReport { disagreements, ..ClusterReport::default() }
    }

    #[test]
    fn set_while_they_differ_cleared_when_fixed_and_kept_when_unread() {
        let (t0, t1) = (jiff::Timestamp::from_second(0).unwrap(), jiff::Timestamp::from_second(60).unwrap());
        assert!(conditions(&[], Some(&report(&[])), t0).is_empty(), "never differed: no condition");
        let on = conditions(&[], Some(&report(&["spec.httpProxy"])), t0);
        assert!(on[0].status && on[0].message.ends_with("Proxy/cluster spec.httpProxy"), "{on:?}");
        assert_eq!(conditions(&on, Some(&report(&["spec.httpProxy"])), t1), on, "unchanged: same time");
        let unread = ClusterReport { sources_error: Some("403".into()), ..ClusterReport::default() };
        assert_eq!(conditions(&on, Some(&unread), t1), on);
        assert_eq!(conditions(&on, None, t1), on);
        let off = conditions(&on, Some(&report(&[])), t1);
        assert!(!off[0].status && off[0].reason == "AsExpected" && off[0].last_transition_time == t1, "{off:?}");
    }
}
