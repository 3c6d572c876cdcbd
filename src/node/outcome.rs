//! What happened to each change of an apply script, parsed back from the
//! NUL-terminated tokens it prints (the same framing as [`super::facts`]):
//!
//! ```text
//! winfleet-outcomes 1
//! op <index> applied | unchanged | failed <reason>
//! end
//! ```

use std::fmt;

use serde::Serialize;

use crate::vocab::report::{ReportError, Tokens};

/// The start marker of an apply report.
pub const OUTCOMES_MARKER: &str = "winfleet-outcomes";
/// The version of the apply report format.
pub const OUTCOMES_VERSION: &str = "1";

/// The outcome of one change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", content = "reason", rename_all = "camelCase")]
pub enum Outcome {
    /// The node was changed.
    Applied,
    /// The node already had the desired value when the script ran.
    Unchanged,
    /// The change failed; the node's own words, or why none came back.
    Failed(String),
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Applied => f.write_str("applied"),
            Outcome::Unchanged => f.write_str("unchanged"),
            Outcome::Failed(reason) => write!(f, "failed: {reason}"),
        }
    }
}

/// Reads the outcomes of `count` changes. A change the report does not
/// mention (the connection was cut, the script was killed) is failed with
/// that reason; the next round observes again and converges.
pub fn parse_outcomes(output: &[u8], count: usize) -> Result<Vec<Outcome>, ReportError> {
    parse_report(output, count).map(|r| r.outcomes)
}

/// An apply report: the outcomes, and the stat keys of the files it put in
/// place (`lkey <path> <key>`), which spare the next observation hashing
/// them again.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApplyReport {
    /// One per change.
    pub outcomes: Vec<Outcome>,
    /// Node path → stat key, for files written.
    pub keys: Vec<(String, String)>,
}

/// Reads an apply report (see [`parse_outcomes`]).
pub fn parse_report(output: &[u8], count: usize) -> Result<ApplyReport, ReportError> {
    let text = String::from_utf8_lossy(output);
    let mut outcomes: Vec<Option<Outcome>> = vec![None; count];
    let mut keys = Vec::new();
    let cut = match read(&text, &mut outcomes, &mut keys) {
        Ok(()) => false,
        Err(ReportError::Truncated) => true,
        Err(e) => return Err(e),
    };
    let missing = if cut {
        "no outcome: the report was cut off (connection lost?); the next round re-observes"
    } else {
        "no outcome reported"
    };
    let outcomes = outcomes.into_iter().map(|o| o.unwrap_or_else(|| Outcome::Failed(missing.to_owned()))).collect();
    Ok(ApplyReport { outcomes, keys })
}

fn read(text: &str, outcomes: &mut [Option<Outcome>], keys: &mut Vec<(String, String)>) -> Result<(), ReportError> {
    let mut tokens = Tokens::after_marker(text, OUTCOMES_MARKER, OUTCOMES_VERSION)?;
    loop {
        match tokens.next()? {
            "end" => return Ok(()),
            "lkey" => {
                let path = tokens.next()?.to_owned();
                keys.push((path, tokens.next()?.to_owned()));
            }
            "op" => {
                let index = tokens.next()?;
                let outcome = match tokens.next()? {
                    "applied" => Outcome::Applied,
                    "unchanged" => Outcome::Unchanged,
                    "failed" => Outcome::Failed(tokens.next()?.trim().to_owned()),
                    other => return Err(ReportError::Unexpected(other.to_owned())),
                };
                let slot = index.parse::<usize>().ok().and_then(|i| outcomes.get_mut(i));
                let slot = slot.ok_or_else(|| ReportError::Unexpected(index.to_owned()))?;
                *slot = Some(outcome);
            }
            other => return Err(ReportError::Unexpected(other.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(tokens: &[&str]) -> Vec<u8> {
        tokens.iter().flat_map(|t| t.bytes().chain([0])).collect()
    }

    #[test]
    fn every_outcome_is_read() {
        let out = report(&[
            "winfleet-outcomes",
            "1",
            "op",
            "0",
            "applied",
            "op",
            "2",
            "failed",
            "Permission denied\n",
            "op",
            "1",
            "unchanged",
            "end",
        ]);
        assert_eq!(
            parse_outcomes(&out, 3).unwrap(),
            vec![Outcome::Applied, Outcome::Unchanged, Outcome::Failed("Permission denied".into())]
        );
    }

    #[test]
    fn a_cut_report_fails_the_rest() {
        let out = report(&["winfleet-outcomes", "1", "op", "0", "applied", "op", "1"]);
        let outcomes = parse_outcomes(&out, 2).unwrap();
        assert_eq!(outcomes[0], Outcome::Applied);
        assert!(matches!(&outcomes[1], Outcome::Failed(r) if r.contains("cut off")));
    }

    #[test]
    fn an_index_out_of_range_is_an_error() {
        let out = report(&["winfleet-outcomes", "1", "op", "5", "applied", "end"]);
        assert_eq!(parse_outcomes(&out, 2), Err(ReportError::Unexpected("5".into())));
    }
}
