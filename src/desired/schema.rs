//! JSON Schema validation, the second stage: one draft 2020-12 schema per
//! kind, embedded from `schema/` so the binary and editors use the same files.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use jsonschema::Validator;
use jsonschema::error::ValidationErrorKind;
use serde_json::Value;

use super::kinds::{KINDS, Kind};
use crate::diagnostic::{child, shown, shown_bare};

/// The schema files, by kind.
pub const SCHEMAS: [(Kind, &str); 8] = [
    (Kind::InstancesConfigMap, include_str!("../../schema/configmap-windows-instances.schema.json")),
    (Kind::ServicesConfigMap, include_str!("../../schema/configmap-windows-services.schema.json")),
    (Kind::WindowsInstanceList, include_str!("../../schema/windowsinstancelist.schema.json")),
    (Kind::MachineSet, include_str!("../../schema/machineset.schema.json")),
    (Kind::ImageDigestMirrorSet, include_str!("../../schema/imagedigestmirrorset.schema.json")),
    (Kind::ImageTagMirrorSet, include_str!("../../schema/imagetagmirrorset.schema.json")),
    (Kind::Proxy, include_str!("../../schema/proxy.schema.json")),
    (Kind::Fleet, include_str!("../../schema/fleet.schema.json")),
];

type Compiled = BTreeMap<Kind, Result<Validator, String>>;

fn validators() -> &'static Compiled {
    static VALIDATORS: OnceLock<Compiled> = OnceLock::new();
    VALIDATORS.get_or_init(|| {
        SCHEMAS
            .iter()
            .map(|(kind, text)| {
                let compiled = serde_json::from_str::<Value>(text)
                    .map_err(|e| e.to_string())
                    .and_then(|schema| jsonschema::draft202012::new(&schema).map_err(|e| e.to_string()));
                (*kind, compiled)
            })
            .collect()
    })
}

/// Validates a document against its kind's schema; returns (pointer,
/// message) per problem, in a stable order.
pub fn validate(kind: Kind, doc: &Value) -> Vec<(String, String)> {
    let validator = match validators().get(&kind) {
        Some(Ok(v)) => v,
        Some(Err(e)) => {
            return vec![(String::new(), format!("internal error: the {} schema does not compile: {e}", kind.name()))];
        }
        None => return vec![(String::new(), format!("internal error: no schema for {}", kind.name()))],
    };
    if validator.is_valid(doc) {
        return Vec::new();
    }
    let mut problems: Vec<(String, String)> = Vec::new();
    for error in validator.iter_errors(doc) {
        let at = error.instance_path().as_str().to_owned();
        match error.kind() {
            ValidationErrorKind::AdditionalProperties { unexpected } => {
                for field in unexpected {
                    problems.push((child(&at, field), format!("unknown field {}", shown(field))));
                }
            }
            ValidationErrorKind::Required { property } => {
                let name = property.as_str().map_or_else(|| property.to_string(), str::to_owned);
                problems.push((at, format!("missing required field \"{name}\"")));
            }
            // jsonschema writes the whole value into its message: it is
            // shown as every value is (cut, with its size).
            _ => {
                let instance = match error.instance().as_ref() {
                    Value::String(s) => shown(s),
                    other => shown_bare(&other.to_string()),
                };
                problems.push((at, error.masked_with(instance).to_string()));
            }
        }
    }
    problems.sort();
    problems.dedup();
    problems
}

/// Names every kind's schema file, for documentation and tests.
pub fn schema_files() -> impl Iterator<Item = (Kind, String)> {
    KINDS.iter().map(|(k, _, _)| (*k, format!("schema/{}.schema.json", k.schema_name())))
}
