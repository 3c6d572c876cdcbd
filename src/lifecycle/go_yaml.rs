//! Two Go text forms WMCO's re-marshalled files carry, so that winfleet
//! writes byte for byte what WMCO writes (issue 36): the YAML that
//! `sigs.k8s.io/yaml` `Marshal` emits (JSON, then go-yaml v2: map keys
//! sorted, block style, sequences at their key's indent, plain scalars
//! unless they would read back as something else), and Go's
//! `time.Duration` (`ParseDuration`, `String`: `12h` → `12h0m0s`). Pure.
//!
//! The emitter covers what a JSON value holds. One simplification: a
//! string with a line break is written double-quoted (go-yaml writes a
//! literal block); the same text reads back, the bytes differ. No
//! credential-provider config MCO renders holds one.

use std::fmt::Write;

use serde_json::Value;

/// `value` as `sigs.k8s.io/yaml` `Marshal` writes it.
pub fn to_yaml(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(map) if !map.is_empty() => emit_map(&mut out, map, 0, false),
        Value::Array(seq) if !seq.is_empty() => emit_seq(&mut out, seq, 0, false),
        scalar => {
            out.push_str(&scalar_text(scalar));
            out.push('\n');
        }
    }
    out
}

fn pad(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
}

/// A mapping at `indent`; `inline` when its first key follows a `- `.
fn emit_map(out: &mut String, map: &serde_json::Map<String, Value>, indent: usize, inline: bool) {
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    for (i, key) in keys.into_iter().enumerate() {
        if !(inline && i == 0) {
            pad(out, indent);
        }
        out.push_str(&string_scalar(key));
        out.push(':');
        match &map[key] {
            Value::Object(inner) if !inner.is_empty() => {
                out.push('\n');
                emit_map(out, inner, indent + 2, false);
            }
            Value::Array(seq) if !seq.is_empty() => {
                out.push('\n');
                emit_seq(out, seq, indent, false);
            }
            scalar => {
                out.push(' ');
                out.push_str(&scalar_text(scalar));
                out.push('\n');
            }
        }
    }
}

/// A sequence at `indent` (go-yaml does not indent a sequence under its key).
fn emit_seq(out: &mut String, seq: &[Value], indent: usize, inline: bool) {
    for (i, item) in seq.iter().enumerate() {
        if !(inline && i == 0) {
            pad(out, indent);
        }
        out.push_str("- ");
        match item {
            Value::Object(inner) if !inner.is_empty() => emit_map(out, inner, indent + 2, true),
            Value::Array(inner) if !inner.is_empty() => emit_seq(out, inner, indent + 2, true),
            scalar => {
                out.push_str(&scalar_text(scalar));
                out.push('\n');
            }
        }
    }
}

fn scalar_text(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => string_scalar(s),
        Value::Array(_) => "[]".to_owned(),
        Value::Object(_) => "{}".to_owned(),
    }
}

/// go-yaml v2's choice for a string: plain when it reads back as the same
/// string and the emitter allows it, single-quoted when only the first
/// holds (`'*.dkr.ecr.*.amazonaws.com'`), double-quoted when a plain form
/// would read back as another type (`"true"`, `"12"`, `""`).
fn string_scalar(s: &str) -> String {
    if s.contains(['\n', '\r']) || s.chars().any(|c| c.is_control()) || !resolves_to_string(s) {
        return double_quoted(s);
    }
    if plain_allowed(s) { s.to_owned() } else { format!("'{}'", s.replace('\'', "''")) }
}

fn double_quoted(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Whether go-yaml v2's `resolve` reads the plain text back as a string:
/// not null, a boolean (YAML 1.1's `yes`/`no`/`on`/`off`/`y`/`n` too), a
/// number, a base-60 float or a timestamp.
fn resolves_to_string(s: &str) -> bool {
    const OTHER: [&str; 31] = [
        "", "~", "null", "Null", "NULL", "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "true", "True",
        "TRUE", "false", "False", "FALSE", "on", "On", "ON", "off", "Off", "OFF", ".inf", ".Inf", ".INF", ".nan",
    ];
    if OTHER.contains(&s) || [".NaN", ".NAN", "-.inf", "-.Inf", "-.INF", "+.inf", "+.Inf", "+.INF"].contains(&s) {
        return false;
    }
    let Some(first) = s.chars().next() else { return false };
    if !(first.is_ascii_digit() || matches!(first, '+' | '-' | '.')) {
        return true;
    }
    let plain = s.replace('_', "");
    let unsigned = plain.trim_start_matches(['+', '-']);
    let number = plain.parse::<f64>().is_ok()
        || ["0x", "0b", "0o"].iter().any(|p| unsigned.strip_prefix(p).is_some_and(|d| !d.is_empty()))
        || (unsigned.contains(':') && unsigned.split(':').all(|p| p.parse::<f64>().is_ok()));
    let timestamp = s.len() >= 10
        && s.as_bytes()[..10]
            .iter()
            .enumerate()
            .all(|(i, b)| if i == 4 || i == 7 { *b == b'-' } else { b.is_ascii_digit() });
    !(number || timestamp)
}

/// libyaml's analysis: a plain scalar may not start with an indicator,
/// start or end with a space, or hold `: ` or ` #`.
fn plain_allowed(s: &str) -> bool {
    let first = s.chars().next().unwrap_or(' ');
    let second = s.chars().nth(1);
    let leading_indicator =
        matches!(first, '#' | ',' | '[' | ']' | '{' | '}' | '&' | '*' | '!' | '|' | '>' | '\'' | '"' | '%' | '@' | '`')
            || (matches!(first, '-' | '?' | ':') && second.is_none_or(|c| c == ' '));
    let flow_indicator = s.contains([',', '[', ']', '{', '}']);
    !(leading_indicator
        || flow_indicator
        || s.starts_with(' ')
        || s.ends_with(' ')
        || s.ends_with(':')
        || s.contains(": ")
        || s.contains(" #"))
}

const NANOS: [(&str, u128); 9] = [
    ("ns", 1),
    ("us", 1_000),
    ("\u{b5}s", 1_000),
    ("\u{3bc}s", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
    ("", 0),
];

/// Go's `time.ParseDuration`, in nanoseconds.
pub fn parse_duration(text: &str) -> Result<i64, String> {
    let bad = || format!("{text:?} is not a Go duration (e.g. 12h, 90m, 1h30m)");
    let (negative, mut rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(bad());
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(rest.len());
        let (number, tail) = rest.split_at(digits);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() {
            return Err(bad());
        }
        let unit_len = tail.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let scale = NANOS.iter().find(|(u, n)| *u == unit && *n > 0).map(|(_, n)| *n).ok_or_else(bad)?;
        let whole: u128 = if whole.is_empty() { 0 } else { whole.parse().map_err(|_| bad())? };
        let mut part = whole.checked_mul(scale).ok_or_else(bad)?;
        let mut place = scale;
        for digit in fraction.chars() {
            place /= 10;
            part += u128::from(digit.to_digit(10).ok_or_else(bad)?) * place;
        }
        total = total.checked_add(part).ok_or_else(bad)?;
        rest = tail;
    }
    let total = i64::try_from(total).map_err(|_| bad())?;
    Ok(if negative { -total } else { total })
}

/// Go's `time.Duration.String`.
pub fn duration_string(nanos: i64) -> String {
    let sign = if nanos < 0 { "-" } else { "" };
    let u = u128::from(nanos.unsigned_abs());
    if u == 0 {
        return "0s".to_owned();
    }
    if u < 1_000_000_000 {
        let (unit, digits) = match u {
            0..1_000 => ("ns", 0),
            1_000..1_000_000 => ("\u{b5}s", 3),
            _ => ("ms", 6),
        };
        return format!("{sign}{}{unit}", decimal(u, digits));
    }
    let seconds = u / 1_000_000_000;
    let s = format!("{}s", decimal((seconds % 60) * 1_000_000_000 + u % 1_000_000_000, 9));
    let (hours, minutes) = (seconds / 3600, (seconds / 60) % 60);
    match (hours, seconds >= 60) {
        (0, false) => format!("{sign}{s}"),
        (0, true) => format!("{sign}{minutes}m{s}"),
        _ => format!("{sign}{hours}h{minutes}m{s}"),
    }
}

/// `v / 10^digits` with its fraction, trailing zeros dropped.
fn decimal(v: u128, digits: u32) -> String {
    let scale = 10u128.pow(digits);
    let fraction = format!("{:0width$}", v % scale, width = digits as usize);
    let fraction = fraction.trim_end_matches('0');
    if fraction.is_empty() { (v / scale).to_string() } else { format!("{}.{fraction}", v / scale) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn durations_read_and_print_as_go_does() {
        let cases = [
            ("12h", "12h0m0s"),
            ("90m", "1h30m0s"),
            ("1h30m", "1h30m0s"),
            ("45s", "45s"),
            ("61s", "1m1s"),
            ("1.5s", "1.5s"),
            ("1500ms", "1.5s"),
            ("500ms", "500ms"),
            ("1500us", "1.5ms"),
            ("2\u{b5}s", "2\u{b5}s"),
            ("7ns", "7ns"),
            ("0", "0s"),
            ("-5m", "-5m0s"),
        ];
        for (text, printed) in cases {
            let nanos = parse_duration(text).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(duration_string(nanos), printed, "{text}");
        }
        for bad in ["", "12", "h", "1x", "1.2.3s", "99999999999999999999h"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn yaml_is_emitted_with_sorted_keys_and_go_yamls_quoting() {
        let value = json!({
            "b": ["*.x", "plain", "true", "", "12", "a: b", "it's", "2024-01-01"],
            "a": {"z": 1, "y": [{"k": "v", "j": null}, ["x", "y"]], "e": [], "f": {}},
        });
        // YAML 1.1's `y` is a boolean to go-yaml v2: quoted, key or value.
        let expected = "a:\n  e: []\n  f: {}\n  \"y\":\n  - j: null\n    k: v\n  - - x\n    - \"y\"\n  z: 1\nb:\n- '*.x'\n\
                        - plain\n- \"true\"\n- \"\"\n- \"12\"\n- 'a: b'\n- it's\n- \"2024-01-01\"\n";
        assert_eq!(to_yaml(&value), expected);
        assert_eq!(to_yaml(&json!("two\nlines")), "\"two\\nlines\"\n");
    }
}
