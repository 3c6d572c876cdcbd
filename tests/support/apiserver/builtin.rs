//! Built-in kinds decoded as kube-apiserver decodes a write, before
//! anything is stored; each found against kube-apiserver v1.37.2, where
//! this server stored the body verbatim:
//!
//! - MicroTime fields (a Lease's `acquireTime` and `renewTime`,
//!   metav1.MicroTime's UnmarshalJSON): Go's layout
//!   `2006-01-02T15:04:05.000000Z07:00`, so exactly six fractional digits,
//!   a `Z` or `±hh:mm` offset, or null; any other string is a 400
//!   BadRequest ("cannot be handled as a Lease"), and a valid one is
//!   stored in UTC (`+01:00` becomes `Z`) (tests/real_cluster_leader.rs).
//! - A Secret's `stringData` is write-only: merged into `data`
//!   (base64-encoded, over a key of the same name) and never stored, so a
//!   reader of `data` finds what was written as text
//!   (tests/real_cluster_import.rs).
//! - A Node's `spec.unschedulable` is a Go bool with `omitempty`: `false`
//!   (an uncordon's merge patch) is not stored, so a reader finds the
//!   field absent, as on a Node never cordoned
//!   (tests/real_cluster_lifecycle.rs).

use base64::Engine;
use serde_json::{Map, Value};

use super::resources::Resource;
use super::status::{ApiError, bad_request};

/// Go's RFC3339Micro layout, named in the error as the real server does.
const LAYOUT: &str = "2006-01-02T15:04:05.000000Z07:00";

/// The MicroTime fields of a kind, as JSON pointers.
fn fields(res: &Resource) -> &'static [&'static str] {
    match (res.group, res.kind) {
        ("coordination.k8s.io", "Lease") => &["/spec/acquireTime", "/spec/renewTime"],
        _ => &[],
    }
}

/// Decodes a written object of any kind (only the kinds above change).
pub(crate) fn decode(res: &Resource, v: &mut Value) -> Result<(), ApiError> {
    if (res.group, res.kind) == ("", "Secret") {
        string_data(v);
    }
    if (res.group, res.kind) == ("", "Node")
        && let Some(spec) = v.get_mut("spec").and_then(Value::as_object_mut)
        && spec.get("unschedulable") == Some(&Value::Bool(false))
    {
        spec.remove("unschedulable");
    }
    micro_times(res, v)
}

/// Folds `stringData` into `data`.
fn string_data(v: &mut Value) {
    let Some(object) = v.as_object_mut() else { return };
    let Some(Value::Object(strings)) = object.remove("stringData") else { return };
    let data = object.entry("data").or_insert_with(|| Value::Object(Map::new()));
    if !data.is_object() {
        *data = Value::Object(Map::new());
    }
    for (key, text) in strings {
        if let (Some(text), Some(data)) = (text.as_str(), data.as_object_mut()) {
            data.insert(key, Value::String(base64::engine::general_purpose::STANDARD.encode(text)));
        }
    }
}

/// Checks and normalizes every MicroTime field of a written object.
fn micro_times(res: &Resource, v: &mut Value) -> Result<(), ApiError> {
    for pointer in fields(res) {
        let Some(field) = v.pointer_mut(pointer) else { continue };
        let Some(text) = field.as_str() else {
            if field.is_null() {
                continue;
            }
            return Err(refused(res, &field.to_string()));
        };
        *field = Value::String(utc_micro(text).ok_or_else(|| refused(res, text))?);
    }
    Ok(())
}

fn refused(res: &Resource, text: &str) -> ApiError {
    bad_request(format!(
        "{kind} in version \"{version}\" cannot be handled as a {kind}: parsing time {text:?} as \"{LAYOUT}\"",
        kind = res.kind,
        version = res.version
    ))
}

/// `text` in UTC with six fractional digits, when it has Go's layout.
fn utc_micro(text: &str) -> Option<String> {
    let b = text.as_bytes();
    let digits = |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    let shape = b.len() >= 27
        && [(0..4), (5..7), (8..10), (11..13), (14..16), (17..19), (20..26)].into_iter().all(digits)
        && (b[4], b[7], b[10], b[13], b[16], b[19]) == (b'-', b'-', b'T', b':', b':', b'.');
    let zone = &b.get(26..)?;
    let zoned = *zone == b"Z" || (zone.len() == 6 && matches!(zone[0], b'+' | b'-') && zone[3] == b':');
    if !(shape && zoned) {
        return None;
    }
    let at: jiff::Timestamp = text.parse().ok()?;
    Some(at.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string())
}
