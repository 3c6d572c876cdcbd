//! Valid repositories load; planning a revision against itself changes
//! nothing; and the JSON Schemas and the Rust types agree on every document
//! of every fixture.

mod support;

use std::path::PathBuf;

use winfleet::desired::typed::type_check;
use winfleet::desired::{LoadOptions, kinds, load, schema, yaml};
use winfleet::plan::offline;
use winfleet::source::read_worktree;

fn valid_repositories() -> Vec<PathBuf> {
    let mut repos = support::cases("valid");
    repos.push(support::root().join("examples-repo"));
    repos
}

#[test]
fn every_valid_fixture_and_the_examples_repo_load_without_errors() {
    let mut failures = Vec::new();
    for repo in valid_repositories() {
        let loaded = load(&read_worktree(&repo).unwrap(), LoadOptions::default());
        if loaded.desired.is_none() {
            let text: Vec<String> = loaded.diagnostics.iter().map(ToString::to_string).collect();
            failures.push(format!("{}:\n{}", repo.display(), text.join("\n")));
        }
    }
    support::report(failures);
}

#[test]
fn planning_any_valid_revision_against_itself_reports_no_changes() {
    for repo in valid_repositories() {
        let snapshot = read_worktree(&repo).unwrap();
        // Two separate loads: nothing may depend on sharing the same specs.
        let a = load(&snapshot, LoadOptions::default()).desired.unwrap();
        let b = load(&snapshot, LoadOptions::default()).desired.unwrap();
        let plan = offline::plan(Some(&a), &b);
        assert!(!plan.has_changes(), "{}: {plan:#?}", repo.display());
    }
}

#[test]
fn the_examples_repo_describes_a_full_fleet() {
    let loaded = load(&read_worktree(&support::root().join("examples-repo")).unwrap(), LoadOptions::default());
    let desired = loaded.desired.unwrap();
    assert!(desired.instances.len() >= 4);
    assert_eq!(desired.machine_sets.len(), 2);
    assert!(desired.mirror_sets.keys().any(|k| k.starts_with("ImageTagMirrorSet/")));
    assert!(desired.specs.values().all(|s| s.environment.contains_key("HTTP_PROXY")));
}

#[test]
fn schemas_and_types_accept_exactly_the_same_documents() {
    let mut checked = 0;
    let mut failures = Vec::new();
    let mut roots = vec![support::fixture(""), support::root().join("examples-repo")];
    roots.sort();
    for root in roots {
        for file in read_worktree(&root).unwrap().files {
            if !file.path.ends_with(".yaml") && !file.path.ends_with(".yml") {
                continue;
            }
            let Ok(text) = std::str::from_utf8(&file.bytes) else { continue };
            let Ok(docs) = yaml::parse_documents(&file.path, text) else { continue };
            for (i, doc) in docs.iter().enumerate() {
                let Ok(kind) = kinds::identify(doc) else { continue };
                let by_schema = schema::validate(kind, doc).is_empty();
                let by_type = type_check(kind, doc);
                checked += 1;
                // JSON Schema counts 22.0 as an integer; the types (like
                // Kubernetes) refuse a decimal where a whole number goes, and
                // say so plainly. The one intended difference.
                let decimal = matches!(&by_type, Err((_, m)) if m.contains("is a decimal number"));
                if by_schema != by_type.is_ok() && !(by_schema && decimal) {
                    failures.push(format!(
                        "{}/{} document {i}: schema says {}, types say {:?}",
                        root.display(),
                        file.path,
                        if by_schema { "valid" } else { "invalid" },
                        by_type
                    ));
                }
            }
        }
    }
    assert!(checked > 50, "only {checked} documents checked");
    support::report(failures);
}

#[test]
fn every_schema_file_is_embedded_and_compiles() {
    for (kind, path) in schema::schema_files() {
        let text = std::fs::read_to_string(support::root().join(&path)).unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["$schema"], "https://json-schema.org/draft/2020-12/schema", "{path}");
        jsonschema::draft202012::new(&value).unwrap_or_else(|e| panic!("{path}: {e}"));
        let embedded = schema::SCHEMAS.iter().find(|(k, _)| *k == kind).unwrap().1;
        assert_eq!(embedded, text, "{path} is the embedded schema");
    }
}

/// A repository that mirrors quay.io only (disconnected nodes would pull
/// everything else directly) is valid, with a warning naming the pause
/// image; the examples repo, which mirrors it, gets none.
#[test]
fn mirrors_without_the_pause_images_registry_are_valid_with_a_warning_naming_the_image() {
    let dir = tempfile::tempdir().unwrap();
    let idms = "apiVersion: config.openshift.io/v1\nkind: ImageDigestMirrorSet\nmetadata:\n  name: quay\nspec:\n  \
                imageDigestMirrors:\n  - source: quay.io/org\n    mirrors:\n    - mirror.corp.example/org\n";
    std::fs::write(dir.path().join("quay.yaml"), idms).unwrap();
    let loaded = load(&read_worktree(dir.path()).unwrap(), LoadOptions::default());
    assert!(loaded.desired.is_some());
    let text: Vec<String> = loaded.diagnostics.iter().map(ToString::to_string).collect();
    assert_eq!(
        text,
        [
            "quay.yaml:5:1: /spec: warning: the mirror sets mirror 1 registry but not mcr.microsoft.com, the registry of \
          the pause image every Windows pod needs (mcr.microsoft.com/oss/kubernetes/pause:3.9, containerd's \
          sandbox_image): a node that cannot reach it starts no pod; mirror it too"
        ]
    );
    let examples = load(&read_worktree(&support::root().join("examples-repo")).unwrap(), LoadOptions::default());
    assert!(!examples.diagnostics.iter().any(|d| d.message.contains("pause image")), "{:?}", examples.diagnostics);
}
