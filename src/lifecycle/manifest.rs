//! The services manifest in force, validated (see [`rules::services`]),
//! and the JSONPath templates its node variables use.
//!
//! [`rules::services`]: crate::desired::rules::services

use serde_json::Value;

use crate::diagnostic::{shown, shown_bare};

/// The services manifest: the services every node runs, in start order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServicesManifest {
    /// The ConfigMap's name (`windows-services-<version>`).
    pub name: String,
    /// The file that holds it.
    pub origin: String,
    /// The services, stably sorted by priority.
    pub services: Vec<ServiceDef>,
    /// Lower-case hex SHA-256 of [`Self::canonical`].
    pub digest: String,
    /// Deterministic JSON of the services (what the desired version hashes).
    pub canonical: String,
    /// Where its `data.services` is written (what a finding about a
    /// service points at).
    pub services_at: ManifestAt,
}

/// Where a services manifest's `data.services` is written: the file, the
/// YAML document in it, the line and column (0 when not known).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ManifestAt {
    /// Repository path of the file.
    pub path: String,
    /// Index of the YAML document in the file.
    pub document: usize,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
}

impl ManifestAt {
    /// An error about `data.services` there, as validation prints it.
    pub fn error(&self, message: impl Into<String>) -> crate::diagnostic::Diagnostic {
        let mut d = crate::diagnostic::Diagnostic::error(&self.path, self.document, "/data/services", message);
        (d.line, d.column) = (self.line, self.column);
        d
    }
}

/// One service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceDef {
    /// Service name.
    pub name: String,
    /// Command line, with its variable names.
    pub command: String,
    /// Variables from the Node object.
    pub node_variables: Vec<NodeVariable>,
    /// Scripts run before it starts.
    pub pre_scripts: Vec<PreScript>,
    /// Services it depends on.
    pub dependencies: Vec<String>,
    /// Started before the Node exists.
    pub bootstrap: bool,
    /// Start order, 0 first.
    pub priority: u32,
}

/// A variable whose value comes from the Node object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeVariable {
    /// The name as it appears in the command.
    pub name: String,
    /// Where its value is.
    pub path: NodeJsonPath,
}

/// A script run before a service starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreScript {
    /// The variable its output gives, if any.
    pub variable: Option<String>,
    /// The script.
    pub path: String,
    /// Node values put into the script.
    pub node_args: Vec<NodeVariable>,
}

/// A Kubernetes JSONPath template, the subset WMCO's manifests use: text,
/// and `{.a.b.c}` field paths whose names may hold `\.` for a dot
/// (`{.metadata.annotations.k8s\.ovn\.org/hybrid-overlay-node-subnet}`).
/// Plain text evaluates to itself (WMCO passes `C:\k\kubeconfig` so).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeJsonPath {
    text: String,
    parts: Vec<Part>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Text(String),
    Field(Vec<String>),
}

impl NodeJsonPath {
    /// Parses a template; the error says what is supported.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut parts = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            if open > 0 {
                parts.push(Part::Text(rest[..open].to_owned()));
            }
            let inner = &rest[open + 1..];
            let close = inner.find('}').ok_or_else(|| format!("{}: a '{{' is never closed", shown(text)))?;
            parts.push(Part::Field(field_path(&inner[..close]).map_err(|e| format!("{}: {e}", shown(text)))?));
            rest = &inner[close + 1..];
        }
        if rest.contains('}') {
            return Err(format!("{}: a '}}' without its '{{'", shown(text)));
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_owned()));
        }
        Ok(Self { text: text.to_owned(), parts })
    }

    /// The value in `node`: every field path must lead to a string (as
    /// WMCO's WICD requires).
    pub fn evaluate(&self, node: &Value) -> Result<String, String> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Text(text) => out.push_str(text),
                Part::Field(path) => {
                    let value = path.iter().try_fold(node, |v, key| v.get(key));
                    match value {
                        Some(Value::String(s)) => out.push_str(s),
                        Some(other) => return Err(format!("{} is {other}, not a string", self.text)),
                        None => return Err(format!("the Node has no {}", self.text)),
                    }
                }
            }
        }
        Ok(out)
    }

    /// The template as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// `.a.b\.c` → `["a", "b.c"]`.
fn field_path(expr: &str) -> Result<Vec<String>, String> {
    let trimmed = expr.trim();
    let trimmed = trimmed.strip_prefix('$').unwrap_or(trimmed);
    let expr = shown_bare(trimmed);
    let Some(mut rest) = trimmed.strip_prefix('.') else {
        return Err(format!("{{{expr}}} is not a field path: winfleet evaluates text and {{.field.field}} paths only"));
    };
    let mut fields = Vec::new();
    loop {
        let mut field = String::new();
        let mut chars = rest.char_indices();
        let mut end = rest.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, '.')) => field.push('.'),
                    _ => return Err(format!("a '\\' in {{{expr}}} must escape a dot")),
                },
                '.' => {
                    end = i;
                    break;
                }
                '[' | ']' | '*' | '?' | '(' | ')' | '@' | '$' | '{' | '\'' | '"' => {
                    return Err(format!(
                        "{{{expr}}} uses '{c}': winfleet evaluates text and {{.field.field}} paths only (no indexes, wildcards, filters or ranges)"
                    ));
                }
                c if c.is_whitespace() => return Err(format!("{{{expr}}} holds a space: no functions or ranges")),
                c => field.push(c),
            }
        }
        if field.is_empty() {
            return Err(format!("{{{expr}}} has an empty field name"));
        }
        fields.push(field);
        if end == rest.len() {
            return Ok(fields);
        }
        rest = &rest[end + 1..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> Value {
        serde_json::json!({
            "metadata": {
                "name": "win-1",
                "annotations": { "k8s.ovn.org/hybrid-overlay-node-subnet": "10.132.1.0/24" },
                "generation": 3,
            }
        })
    }

    #[test]
    fn wmcos_templates_evaluate_on_a_node() {
        let p = |t: &str| NodeJsonPath::parse(t).unwrap().evaluate(&node());
        assert_eq!(p("{.metadata.name}").unwrap(), "win-1");
        assert_eq!(p(r"{.metadata.annotations.k8s\.ovn\.org/hybrid-overlay-node-subnet}").unwrap(), "10.132.1.0/24");
        assert_eq!(p(r"C:\k\kubeconfig").unwrap(), r"C:\k\kubeconfig");
        assert_eq!(p("node-{.metadata.name}.log").unwrap(), "node-win-1.log");
        assert_eq!(p("{$.metadata.name}").unwrap(), "win-1");
        assert!(p("{.metadata.missing}").unwrap_err().contains("has no"));
        assert!(p("{.metadata.generation}").unwrap_err().contains("not a string"));
    }

    #[test]
    fn what_winfleet_cannot_evaluate_is_refused_when_parsed() {
        for bad in [
            "{.items[0].name}",
            "{.metadata.*}",
            "{range .items}",
            "{.a",
            "a}",
            "{metadata.name}",
            "{.a..b}",
            r"{.a\b}",
        ] {
            assert!(NodeJsonPath::parse(bad).is_err(), "{bad}");
        }
    }
}
