//! The report's lines for the cluster's Proxy and mirror sets (issue 27,
//! item 4): a read that failed, and where the repository disagrees.

use std::fmt::Write as _;

use crate::cluster::disagree::Disagreement;

/// The lines, in the report's cluster part.
pub(super) fn render_text(out: &mut String, disagreements: &[Disagreement], error: Option<&str>) {
    if let Some(e) = error {
        let _ = writeln!(out, "  ! the cluster's Proxy and mirror sets: {e}");
    }
    if !disagreements.is_empty() {
        let _ = writeln!(
            out,
            "  ! the repository disagrees with the cluster (the repository's values are applied; \
             Linux nodes follow the cluster's):"
        );
        for d in disagreements {
            let _ = writeln!(out, "      {}", d.line());
        }
    }
}
