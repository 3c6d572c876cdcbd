//! Label and field selectors, parsed like `labels.Parse` / `fields.ParseSelector`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::resources::Resource;
use super::status::{ApiError, bad_request};

#[derive(Debug, Clone, PartialEq)]
enum Op {
    Exists,
    NotExists,
    Eq(String),
    NotEq(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Gt(i64),
    Lt(i64),
}

/// A parsed label selector: requirements ANDed.
#[derive(Debug, Clone, Default)]
pub(crate) struct LabelSelector(Vec<(String, Op)>);

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 316
        && k.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'))
        && k.matches('/').count() <= 1
}

fn valid_value(v: &str) -> bool {
    v.len() <= 63 && v.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Splits on commas outside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn parse_set(s: &str, whole: &str) -> Result<Vec<String>, ApiError> {
    let s = s.trim();
    let inner = s
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .ok_or_else(|| bad_request(format!("unable to parse requirement: found '{s}', expected: '(' in {whole:?}")))?;
    let values: Vec<String> = inner.split(',').map(|v| v.trim().to_string()).collect();
    if inner.trim().is_empty() {
        return Err(bad_request(format!(
            "unable to parse requirement: for 'in', 'notin' operators, values set can't be empty in {whole:?}"
        )));
    }
    if let Some(bad) = values.iter().find(|v| !valid_value(v)) {
        return Err(bad_request(format!("unable to parse requirement: invalid label value: {bad:?}")));
    }
    Ok(values)
}

impl LabelSelector {
    /// Parses the `labelSelector` query parameter; malformed → 400.
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(Self(reqs));
        }
        for part in split_top(s) {
            let part = part.trim();
            let err = || bad_request(format!("unable to parse requirement: {part:?} in label selector {s:?}"));
            if let Some(key) = part.strip_prefix('!') {
                let key = key.trim();
                if !valid_key(key) {
                    return Err(err());
                }
                reqs.push((key.to_string(), Op::NotExists));
                continue;
            }
            let end = part.find([' ', '\t', '=', '!', '<', '>', '(']).unwrap_or(part.len());
            let key = &part[..end];
            if !valid_key(key) {
                return Err(err());
            }
            let rest = part[end..].trim_start();
            let op = if rest.is_empty() {
                Op::Exists
            } else if let Some(v) = rest.strip_prefix("!=") {
                Op::NotEq(v.trim().to_string())
            } else if let Some(v) = rest.strip_prefix("==") {
                Op::Eq(v.trim().to_string())
            } else if let Some(v) = rest.strip_prefix('=') {
                Op::Eq(v.trim().to_string())
            } else if let Some(v) = rest.strip_prefix('>') {
                Op::Gt(v.trim().parse().map_err(|_| err())?)
            } else if let Some(v) = rest.strip_prefix('<') {
                Op::Lt(v.trim().parse().map_err(|_| err())?)
            } else if let Some(v) = rest.strip_prefix("notin").filter(|v| v.starts_with([' ', '\t', '('])) {
                Op::NotIn(parse_set(v, s)?)
            } else if let Some(v) = rest.strip_prefix("in").filter(|v| v.starts_with([' ', '\t', '('])) {
                Op::In(parse_set(v, s)?)
            } else {
                return Err(err());
            };
            if let Op::Eq(v) | Op::NotEq(v) = &op
                && !valid_value(v)
            {
                return Err(err());
            }
            reqs.push((key.to_string(), op));
        }
        Ok(Self(reqs))
    }

    /// Whether an object's labels satisfy every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = labels_of(obj);
        self.0.iter().all(|(k, op)| {
            let v = labels.get(k.as_str()).copied();
            match op {
                Op::Exists => v.is_some(),
                Op::NotExists => v.is_none(),
                Op::Eq(x) => v == Some(x.as_str()),
                Op::NotEq(x) => v != Some(x.as_str()),
                Op::In(xs) => v.is_some_and(|v| xs.iter().any(|x| x == v)),
                Op::NotIn(xs) => v.is_none_or(|v| !xs.iter().any(|x| x == v)),
                Op::Gt(n) => v.and_then(|v| v.parse::<i64>().ok()).is_some_and(|v| v > *n),
                Op::Lt(n) => v.and_then(|v| v.parse::<i64>().ok()).is_some_and(|v| v < *n),
            }
        })
    }
}

fn labels_of(obj: &Value) -> BTreeMap<&str, &str> {
    obj.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| m.iter().filter_map(|(k, v)| v.as_str().map(|v| (k.as_str(), v))).collect())
        .unwrap_or_default()
}

/// A `metav1.LabelSelector` object (PodDisruptionBudget `spec.selector`):
/// None (absent) selects nothing, `{}` selects everything.
pub(crate) fn label_selector_object_matches(sel: Option<&Value>, obj: &Value) -> bool {
    let Some(sel) = sel.filter(|s| !s.is_null()) else { return false };
    let labels = labels_of(obj);
    let match_labels = sel.get("matchLabels").and_then(Value::as_object);
    let labels_ok = match_labels
        .is_none_or(|m| m.iter().all(|(k, v)| v.as_str().is_some_and(|v| labels.get(k.as_str()) == Some(&v))));
    let exprs = sel.get("matchExpressions").and_then(Value::as_array);
    let exprs_ok = exprs.is_none_or(|es| {
        es.iter().all(|e| {
            let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
            let values: Vec<&str> = e
                .get("values")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let v = labels.get(key).copied();
            match e.get("operator").and_then(Value::as_str) {
                Some("In") => v.is_some_and(|v| values.contains(&v)),
                Some("NotIn") => v.is_none_or(|v| !values.contains(&v)),
                Some("Exists") => v.is_some(),
                Some("DoesNotExist") => v.is_none(),
                _ => false,
            }
        })
    });
    labels_ok && exprs_ok
}

/// A parsed field selector.
#[derive(Debug, Clone, Default)]
pub(crate) struct FieldSelector(Vec<(Vec<&'static str>, bool, String)>);

impl FieldSelector {
    /// Parses the `fieldSelector` query parameter for `res`; unknown
    /// fields → 400 `field label not supported`.
    pub fn parse(s: &str, res: &Resource) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(Self(reqs));
        }
        for part in s.split(',') {
            let part = part.trim();
            let (field, eq, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, true, v)
            } else {
                return Err(bad_request(format!("invalid selector: '{s}'; can't understand '{part}'")));
            };
            let field = field.trim();
            let path: Vec<&'static str> = match field {
                "metadata.name" => vec!["metadata", "name"],
                "metadata.namespace" => vec!["metadata", "namespace"],
                other => match res.fields.iter().find(|(label, _)| *label == other) {
                    Some((_, path)) => path.to_vec(),
                    None => return Err(bad_request(format!("field label not supported: {other}"))),
                },
            };
            reqs.push((path, eq, value.trim().to_string()));
        }
        Ok(Self(reqs))
    }

    /// Whether the object satisfies every requirement (a missing field reads as "").
    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(path, eq, want)| {
            let mut cur = Some(obj);
            for p in path {
                cur = cur.and_then(|c| c.get(p));
            }
            let got = match cur {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Bool(b)) => b.to_string(),
                Some(Value::Number(n)) => n.to_string(),
                _ if path == &["spec", "unschedulable"] => "false".to_string(),
                _ => String::new(),
            };
            (got == *want) == *eq
        })
    }
}

/// Label and field selector together.
#[derive(Debug, Clone, Default)]
pub(crate) struct Selector {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Selector {
    pub fn parse(label: Option<&str>, field: Option<&str>, res: &Resource) -> Result<Self, ApiError> {
        Ok(Self {
            labels: LabelSelector::parse(label.unwrap_or_default())?,
            fields: FieldSelector::parse(field.unwrap_or_default(), res)?,
        })
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.labels.matches(obj) && self.fields.matches(obj)
    }
}
