//! Issue 39, item 13: the CI examples (examples/ci/) get winfleet from the
//! image deploy/ names instead of compiling it on every pull request, and
//! cache what they must build; a fork's pull request is planned without
//! posting (its token is read-only).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::Value;

fn read(name: &str) -> String {
    std::fs::read_to_string(support::root().join("examples/ci").join(name)).unwrap()
}

fn yaml(name: &str) -> Value {
    serde_saphyr::from_str(&read(name)).unwrap_or_else(|e| panic!("examples/ci/{name} is not YAML: {e}"))
}

/// The GitHub job's steps.
fn github_steps() -> Vec<Value> {
    yaml("github-actions.yml")["jobs"]["plan"]["steps"].as_array().unwrap().clone()
}

fn step<'a>(steps: &'a [Value], name: &str) -> &'a Value {
    steps.iter().find(|s| s["name"].as_str().is_some_and(|n| n.starts_with(name))).unwrap_or_else(|| {
        panic!("no step {name:?} in {steps:#?}");
    })
}

#[test]
fn no_ci_example_compiles_winfleet_with_cargo_install() {
    for name in ["github-actions.yml", "gitlab-ci.yml"] {
        let text = read(name);
        assert!(!text.contains("cargo install"), "examples/ci/{name} still compiles winfleet on every run");
    }
}

#[test]
fn the_github_job_copies_winfleet_out_of_the_image_deploy_names() {
    let steps = github_steps();
    let image = step(&steps, "winfleet, copied out of its image");
    assert_eq!(image["if"], "vars.WINFLEET_IMAGE != ''");
    let run = image["run"].as_str().unwrap();
    assert!(run.contains(r#"docker create "$WINFLEET_IMAGE""#), "{run}");
    assert!(run.contains("/usr/local/bin/winfleet"), "where the Dockerfile installs it: {run}");
    let dockerfile = std::fs::read_to_string(support::root().join("Dockerfile")).unwrap();
    assert!(dockerfile.contains("COPY --from=builder /winfleet /usr/local/bin/winfleet"));
    // The image the comments name is the one deploy/ sets.
    let kustomization = std::fs::read_to_string(support::root().join("deploy/kustomization.yaml")).unwrap();
    assert!(kustomization.contains("- name: winfleet\n  newName: quay.io/example/winfleet\n"));
    for name in ["github-actions.yml", "gitlab-ci.yml"] {
        assert!(read(name).contains("quay.io/example/winfleet@sha256:"), "examples/ci/{name}");
    }
}

#[test]
fn without_an_image_the_github_job_builds_once_per_winfleet_version_from_the_cache() {
    let steps = github_steps();
    let cache = steps.iter().find(|s| s["uses"].as_str().is_some_and(|u| u.starts_with("actions/cache@"))).unwrap();
    assert_eq!(cache["if"], "vars.WINFLEET_IMAGE == ''");
    let paths = cache["with"]["path"].as_str().unwrap();
    for path in ["~/.cargo/registry", "~/.cargo/git", "/winfleet/target"] {
        assert!(paths.contains(path), "{paths}");
    }
    assert!(cache["with"]["key"].as_str().unwrap().contains("vars.WINFLEET_VERSION"), "{cache:#}");
    let build = step(&steps, "winfleet, built once per version");
    let run = build["run"].as_str().unwrap();
    assert!(run.contains(r#"!= "$WINFLEET_VERSION" ]"#), "skipped when the cached build is this version: {run}");
    assert!(run.contains("cargo build --release --locked"), "{run}");
}

#[test]
fn a_fork_pull_request_is_planned_and_uploaded_without_posting() {
    let steps = github_steps();
    let plan = step(&steps, "Plan");
    assert_eq!(
        plan["env"]["POST"],
        "${{ github.event.pull_request.head.repo.full_name == github.repository && 'github' || '' }}"
    );
    assert!(plan["run"].as_str().unwrap().contains(r#"${POST:+--post "$POST"}"#));
    assert!(steps.iter().any(|s| s["uses"].as_str().is_some_and(|u| u.starts_with("actions/upload-artifact@"))));
}

#[test]
fn the_gitlab_job_runs_in_the_image_with_a_shell() {
    let job = &yaml("gitlab-ci.yml")["winfleet-plan"];
    assert_eq!(job["image"]["name"], "$WINFLEET_IMAGE");
    assert_eq!(job["image"]["entrypoint"], serde_json::json!([""]), "the image's entrypoint is winfleet");
    let script: Vec<&str> = job["script"].as_array().unwrap().iter().map(|l| l.as_str().unwrap()).collect();
    assert!(script.iter().all(|l| !l.starts_with("git ")), "the image has no git: {script:?}");
}
