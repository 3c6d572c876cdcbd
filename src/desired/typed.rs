//! The typed parse of one document: serde with unknown fields refused,
//! and a failure explained by its JSON pointer and serde's message with the
//! values it quotes shown cut (`diagnostic::shown`). Pure.

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::kinds::{self, Kind};
use crate::diagnostic;

/// The typed parse alone, for a document of a known kind (used by tests that
/// hold schemas and types to each other).
pub fn type_check(kind: Kind, doc: &Value) -> Result<(), (String, String)> {
    use kinds::*;
    match kind {
        Kind::InstancesConfigMap => typed_parse::<configmap::InstancesConfigMap>(doc).map(drop),
        Kind::ServicesConfigMap => typed_parse::<services::ServicesConfigMap>(doc).map(drop),
        Kind::WindowsInstanceList => typed_parse::<instances::WindowsInstanceList>(doc).map(drop),
        Kind::MachineSet => typed_parse::<machineset::MachineSet>(doc).map(drop),
        Kind::ImageDigestMirrorSet => typed_parse::<mirrors::ImageDigestMirrorSet>(doc).map(drop),
        Kind::ImageTagMirrorSet => typed_parse::<mirrors::ImageTagMirrorSet>(doc).map(drop),
        Kind::Proxy => typed_parse::<proxy::Proxy>(doc).map(drop),
        Kind::Fleet => typed_parse::<fleet::Fleet>(doc).map(drop),
    }
}

/// Deserializes a document into its type; on failure, the JSON pointer of
/// the offending field and the message.
pub fn typed_parse<T: DeserializeOwned>(doc: &Value) -> Result<T, (String, String)> {
    // The fast path; the path-tracking deserializer runs only to explain a failure.
    if let Ok(value) = <T as serde::Deserialize>::deserialize(doc) {
        return Ok(value);
    }
    serde_path_to_error::deserialize(doc).map_err(|e| {
        let pointer: String = e
            .path()
            .iter()
            .filter_map(|seg| match seg {
                serde_path_to_error::Segment::Seq { index } => Some(diagnostic::child("", index)),
                serde_path_to_error::Segment::Map { key } => Some(diagnostic::child("", key)),
                serde_path_to_error::Segment::Enum { variant } => Some(diagnostic::child("", variant)),
                serde_path_to_error::Segment::Unknown => None,
            })
            .collect();
        (pointer, plain(&e.into_inner().to_string()))
    })
}

/// serde's type names in words an administrator reads: `expected u16`
/// becomes the range it stands for, a float is "the decimal number"; and
/// the values it quotes whole shown as every value is (issue 23).
pub(crate) fn plain(message: &str) -> String {
    let mut out = quoted_values_shown(message);
    for (name, range) in [
        ("u8", "0 to 255"),
        ("u16", "0 to 65535"),
        ("u32", "0 to 4294967295"),
        ("u64", "0 to 18446744073709551615"),
        ("i32", "-2147483648 to 2147483647"),
        ("i64", "-9223372036854775808 to 9223372036854775807"),
    ] {
        for end in ["", ")"] {
            let from = format!("expected {name}{end}");
            if out.ends_with(&from) {
                let to = format!("expected a whole number from {range}{end}");
                out = format!("{}{to}", &out[..out.len() - from.len()]);
            }
        }
    }
    if let Some((number, tail)) =
        out.strip_prefix("invalid type: floating point `").and_then(|rest| rest.split_once('`'))
    {
        out = format!("{number} is a decimal number{}", tail.replacen(", expected", "; expected", 1));
    }
    out
}

/// serde quotes the value it could not use whole, as a Rust string literal
/// (`invalid type: string "a\u{7}…"`) or between backticks (`unknown field
/// `…``): each is shown with [`diagnostic::shown`] instead.
fn quoted_values_shown(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(1024));
    let mut rest = message;
    while let Some(i) = rest.find(['"', '`']) {
        out.push_str(&rest[..i]);
        let body = &rest[i + 1..];
        let parsed = if rest[i..].starts_with('"') {
            debug_string(body).map(|(value, len)| (diagnostic::shown(&value), len))
        } else {
            body.find('`').map(|len| (format!("`{}`", diagnostic::shown_bare(&body[..len])), len))
        };
        match parsed {
            Some((shown, len)) => {
                out.push_str(&shown);
                rest = &body[len + 1..];
            }
            None => {
                out.push_str(&rest[i..]);
                return out;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The value of a Rust string literal's body (after the opening quote) and
/// the length up to its closing quote; `None` if it is not one.
fn debug_string(body: &str) -> Option<(String, usize)> {
    let mut value = String::new();
    let mut chars = body.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((value, i)),
            '\\' => match chars.next()?.1 {
                'n' => value.push('\n'),
                'r' => value.push('\r'),
                't' => value.push('\t'),
                '0' => value.push('\0'),
                'u' => {
                    let (_, '{') = chars.next()? else { return None };
                    let mut hex = String::new();
                    for (_, h) in chars.by_ref() {
                        if h == '}' {
                            break;
                        }
                        hex.push(h);
                    }
                    value.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                }
                other => value.push(other),
            },
            c => value.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_messages_show_the_values_they_quote_cut_issue_23() {
        assert_eq!(
            plain("invalid type: string \"0\", expected u32"),
            "invalid type: string \"0\", expected a whole number from 0 to 4294967295"
        );
        let huge = format!("invalid type: string {:?}, expected u16", format!("a\u{7}\"{}", "b".repeat(1_000_000)));
        let text = plain(&huge);
        assert!(text.starts_with("invalid type: string \"a<U+0007>\"bbb"), "{text}");
        assert!(text.ends_with("…\" (1000003 characters), expected a whole number from 0 to 65535"), "{text}");
        let field = format!("unknown field `{}`, expected one of `name`, `path`", "x".repeat(500));
        assert_eq!(
            plain(&field),
            format!("unknown field `{}… (500 characters)`, expected one of `name`, `path`", "x".repeat(80))
        );
        assert_eq!(plain("a \"broken"), "a \"broken");
    }
}
