//! Durations as people write them: `90s`, `10m`, `1h30m`, `1h 30m`,
//! `1.5h`, `2 minutes` (jiff's "friendly" format). The one parser for the
//! Fleet's durations and the command line's; pure.

use std::time::Duration;

use jiff::fmt::friendly::SpanParser;

static PARSER: SpanParser = SpanParser::new();

/// A non-negative duration with units, or `None` (a bare number has no
/// unit and is refused: `10` could be seconds or minutes).
pub fn parse(text: &str) -> Option<Duration> {
    let signed = PARSER.parse_duration(text).ok()?;
    Duration::try_from(signed).ok()
}

/// A command-line duration: [`parse`]'s forms, or a bare number of seconds
/// (what the flags took before units were accepted).
pub fn parse_flag(text: &str) -> Result<Duration, String> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text.parse().map(Duration::from_secs).map_err(|e| format!("{text:?}: {e}"));
    }
    parse(text)
        .ok_or_else(|| format!("{text:?} is not a duration such as 90s, 10m or 1h30m (a bare number is seconds)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_go_and_like_people() {
        assert_eq!(parse("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse("10m"), Some(Duration::from_secs(600)));
        assert_eq!(parse("90s"), Some(Duration::from_secs(90)));
        assert_eq!(parse("1h 30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse("2 minutes"), Some(Duration::from_secs(120)));
        assert_eq!(parse("0s"), Some(Duration::ZERO));
    }

    #[test]
    fn a_duration_needs_a_number_and_a_unit_and_cannot_be_negative() {
        for text in ["10", "m", "", "ten minutes", "-10m", "10 parsecs"] {
            assert_eq!(parse(text), None, "{text:?}");
        }
    }

    #[test]
    fn a_flag_also_takes_bare_seconds() {
        assert_eq!(parse_flag("15"), Ok(Duration::from_secs(15)));
        assert_eq!(parse_flag("10m"), Ok(Duration::from_secs(600)));
        assert!(parse_flag("ten").unwrap_err().contains("is not a duration such as 90s"));
        assert!(parse_flag("").is_err());
    }
}
