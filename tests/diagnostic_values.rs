//! Issue 23, defect 10: a diagnostic shows a repository value cut to a
//! readable length with its size, and shows control and invisible
//! characters as `U+0007`, never as Rust escapes (`\u{7}`): a
//! 1-million-character address once made 8.4 MB of stderr.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use winfleet::desired::{LoadOptions, load};
use winfleet::source::{Snapshot, SourceFile};

const FLEET: &str = "apiVersion: winfleet.io/v1alpha1
kind: Fleet
metadata:
  name: test
spec:
  defaults:
    username: core
    shell: posix
  payload:
    digest: sha256:abababababababababababababababababababababababababababababababab
";

fn instances(field: &str) -> String {
    format!(
        "apiVersion: winfleet.io/v1alpha1\nkind: WindowsInstanceList\nmetadata:\n  name: list\nspec:\n  instances:\n  - address: win-1.corp.example\n    username: Administrator\n    {field}\n"
    )
}

fn services(service: &serde_json::Value) -> String {
    let configmap = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": { "name": "windows-services-1.0.0", "namespace": "openshift-windows-machine-config-operator" },
        "data": { "files": "[]", "services": serde_json::json!([service]).to_string() },
    });
    configmap.to_string()
}

fn mirror_set(kind: &str, field: &str, name: &str, source: &str) -> String {
    format!(
        "apiVersion: config.openshift.io/v1\nkind: {kind}\nmetadata:\n  name: {name}\nspec:\n  {field}:\n  - source: {source}\n    mirrors: [mirror.corp.example/x]\n"
    )
}

fn proxy(field: &str) -> String {
    format!("apiVersion: config.openshift.io/v1\nkind: Proxy\nmetadata:\n  name: cluster\nspec:\n  {field}\n")
}

/// A value of a million characters with a BEL in it, as YAML text.
fn huge() -> String {
    format!("\"a\\a{}\"", "b".repeat(999_998))
}

/// Repositories whose one bad value is huge, by the field it is in.
fn cases() -> Vec<(&'static str, Vec<(&'static str, String)>)> {
    let h = huge();
    let plain = "b".repeat(999_998);
    let service = |field: &str| {
        let mut s =
            serde_json::json!({ "name": "kubelet", "path": "payload/kubelet", "bootstrap": true, "priority": 0 });
        let value = format!("a\u{7}{plain}");
        match field {
            "dependencies" => s[field] = serde_json::json!([value]),
            "variableName" => {
                s["powershellPreScripts"] = serde_json::json!([{ "variableName": value, "path": "hostname -I" }]);
            }
            "nodeVariablesInCommand" => {
                s[field] = serde_json::json!([{ "name": "NODE_NAME", "nodeObjectJsonPath": format!("{{{value}}}") }]);
            }
            _ => s[field] = serde_json::Value::String(value),
        }
        services(&s)
    };
    vec![
        ("address", vec![("list.yaml", instances("").replace("win-1.corp.example", &h))]),
        ("username", vec![("list.yaml", instances("").replace("Administrator", &h))]),
        ("label value", vec![("list.yaml", instances(&format!("labels: {{ a: {h} }}")))]),
        // YAML keys stop at 1024 characters.
        ("unknown field", vec![("list.yaml", instances(&format!("{}: 1", "x".repeat(1_000))))]),
        ("service name", vec![("services.yaml", service("name"))]),
        ("service command", vec![("services.yaml", service("path"))]),
        ("service dependency", vec![("services.yaml", service("dependencies"))]),
        ("pre-script variable", vec![("services.yaml", service("variableName"))]),
        ("node variable path", vec![("services.yaml", service("nodeVariablesInCommand"))]),
        (
            "proxy",
            vec![(
                "proxy.yaml",
                format!(
                    "apiVersion: config.openshift.io/v1\nkind: Proxy\nmetadata:\n  name: cluster\nspec:\n  httpProxy: {h}\n"
                ),
            )],
        ),
        // Issue 35.
        ("configmap name", vec![("cm.yaml", format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {h}\n"))]),
        (
            "tag mirror set name",
            vec![("itms.yaml", mirror_set("ImageTagMirrorSet", "imageTagMirrors", &h, "quay.io/x"))],
        ),
        (
            "digest mirror set name",
            vec![("idms.yaml", mirror_set("ImageDigestMirrorSet", "imageDigestMirrors", &h, "quay.io/x"))],
        ),
        (
            "mirror repository path",
            vec![(
                "idms.yaml",
                mirror_set("ImageDigestMirrorSet", "imageDigestMirrors", "m", &format!("\"quay.io/{}", &h[1..])),
            )],
        ),
        (
            "source registry host",
            vec![("idms.yaml", mirror_set("ImageDigestMirrorSet", "imageDigestMirrors", "m", "\"Qu\\aay.io/x\""))],
        ),
        ("noProxy", vec![("proxy.yaml", proxy(&format!("noProxy: {h}")))]),
        (
            "noProxy entry",
            vec![("proxy.yaml", proxy(&format!("noProxy: \"a.example,a\\a{},b.example\"", "b".repeat(200))))],
        ),
        ("trustedCA", vec![("proxy.yaml", proxy(&format!("trustedCA: {{ name: {h} }}")))]),
        ("status path", vec![("fleet.yaml", FLEET.replace("spec:\n", &format!("spec:\n  status: {{ path: {h} }}\n")))]),
        (
            "registries directory",
            vec![("fleet.yaml", FLEET.replace("spec:\n", &format!("spec:\n  registries: {{ powershellDir: {h} }}\n")))],
        ),
    ]
}

fn load_files(files: Vec<(&str, String)>) -> Vec<String> {
    let mut all = vec![SourceFile { path: "fleet.yaml".into(), bytes: FLEET.as_bytes().to_vec() }];
    all.retain(|f| !files.iter().any(|(p, _)| *p == f.path));
    all.extend(files.into_iter().map(|(p, t)| SourceFile { path: p.into(), bytes: t.into_bytes() }));
    let loaded = load(&Snapshot { revision: None, files: all, links: Vec::new() }, LoadOptions::default());
    assert!(loaded.desired.is_none(), "a huge invalid value is refused");
    loaded.diagnostics.iter().map(ToString::to_string).collect()
}

#[test]
fn a_huge_value_is_shown_cut_with_its_size_issue_23() {
    let mut problems = Vec::new();
    for (case, files) in cases() {
        let diagnostics = load_files(files);
        let total: usize = diagnostics.iter().map(String::len).sum();
        if total > 4_000 {
            problems.push(format!("{case}: {total} bytes of diagnostics, starting {:?}", &diagnostics[0][..300]));
            continue;
        }
        // Where a diagnostic quotes the value, it is cut and gives its size.
        for d in &diagnostics {
            let quotes = d.contains(&"b".repeat(20)) || d.contains(&"x".repeat(20));
            if quotes && !(d.contains("…") && d.contains(" characters)")) {
                problems.push(format!("{case}: the value is not shown cut with its size: {d}"));
            }
        }
        if !diagnostics.iter().any(|d| d.contains(" characters)"))
            && !matches!(case, "username" | "source registry host")
        {
            problems.push(format!("{case}: no diagnostic gives the value's size: {diagnostics:#?}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn control_characters_are_shown_as_code_points_issue_23() {
    let mut problems = Vec::new();
    for (case, files) in cases() {
        if case == "unknown field" {
            continue;
        }
        for d in load_files(files) {
            if d.contains("\\u{") || d.contains("\\a") || d.chars().any(char::is_control) {
                problems.push(format!("{case}: {}", d.chars().take(300).collect::<String>()));
            } else if d.contains("\"a") && !d.contains("a<U+0007>b") {
                problems.push(format!(
                    "{case}: the BEL is not shown as U+0007: {}",
                    d.chars().take(300).collect::<String>()
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn yaml_syntax_errors_show_characters_as_code_points_not_rust_escapes_issue_35() {
    for text in ["a: b\n\u{7}c: d\n", "a: [b\u{7}\n", "\u{202e}: x\n  - y\n", "a: \"\u{1}\n"] {
        let diagnostics = load_files(vec![("bad.yaml", text.to_owned())]);
        let syntax: Vec<&String> = diagnostics.iter().filter(|d| d.starts_with("bad.yaml:")).collect();
        assert!(!syntax.is_empty(), "{text:?}: {diagnostics:#?}");
        for d in syntax {
            assert!(!d.contains("\\u{") && !d.chars().any(winfleet::diagnostic::is_unseen), "{text:?}: {d}");
        }
    }
}
