//! Where the configuration lives: `--path DIR` selects a directory of the
//! repository, `.winfleetignore` and `.gitignore` exclude files, other
//! tools' files beside it are skipped with a note; and the checks a
//! repository shared with other tools needs (the ConfigMap's namespace, a
//! password in a committed proxy URL).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;

use support::remote::git;

const FLEET: &str = "apiVersion: winfleet.io/v1alpha1\nkind: Fleet\nmetadata:\n  name: f\nspec:\n  lab:\n    allowLoopbackAddresses: true\n  defaults:\n    username: Administrator\n";
const LIST: &str = "apiVersion: winfleet.io/v1alpha1\nkind: WindowsInstanceList\nmetadata:\n  name: l\nspec:\n  instances:\n  - address: 10.0.0.1\n";
const WORKFLOW: &str = "name: ci\non: [push]\njobs:\n  plan:\n    runs-on: ubuntu-latest\n";

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn validate(args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["validate"];
    all.extend_from_slice(args);
    support::winfleet(&all)
}

/// A repository that keeps its fleet under clusters/prod beside other YAML.
fn monorepo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "ci/pipeline.yaml", WORKFLOW);
    write(root, "app/deployment.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n");
    write(root, "clusters/prod/fleet.yaml", FLEET);
    write(root, "clusters/prod/instances.yaml", LIST);
    write(root, "clusters/prod/kustomization.yaml", "resources:\n- instances.yaml\n");
    write(root, "clusters/prod/drafts/next.yaml", "apiVersion: v1\nkind: Nope\n");
    write(root, "clusters/prod/.winfleetignore", "# work in progress\ndrafts/\n");
    write(root, "clusters/prod/scratch.yaml", "not: [valid\n");
    write(root, "clusters/prod/.gitignore", "scratch.yaml\n");
    git(root, &["init", "-q", "-b", "main"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "fleet"]);
    dir
}

#[test]
fn path_selects_the_fleet_directory_of_a_repository_with_other_files() {
    let repo = monorepo();
    let dir = repo.path().to_str().unwrap();
    let (code, _, err) = validate(&["--repo", dir]);
    assert_eq!(code, 1, "the whole repository is not a fleet: {err}");
    for rev in [None, Some("HEAD")] {
        let mut args = vec!["--repo", dir, "--path", "clusters/prod"];
        args.extend(rev.iter().flat_map(|r| ["--rev", r]));
        let (code, out, err) = validate(&args);
        assert_eq!(code, 0, "{rev:?}: {out}{err}");
        assert!(out.contains("valid: 1 instance(s)"), "{out}");
        assert!(
            err.contains("kustomization.yaml:1:1: warning: kustomize's file, not winfleet's: skipped"),
            "a note, not an error: {err}"
        );
        assert!(!err.contains("drafts") && !err.contains("scratch"), ".winfleetignore and .gitignore hold: {err}");
    }
    let (code, _, err) = validate(&["--repo", dir, "--path", "clusters/staging"]);
    assert_eq!(code, 1);
    assert!(err.contains("clusters/staging: the repository has no file under it"), "{err}");
    let (code, _, err) = validate(&["--repo", dir, "--path", "../elsewhere"]);
    assert_eq!(code, 1);
    assert!(err.contains("no .."), "{err}");
}

#[test]
fn the_instances_configmap_belongs_in_wmcos_namespace_and_proxy_passwords_are_flagged() {
    let repo = tempfile::tempdir().unwrap();
    let root = repo.path();
    write(root, "fleet.yaml", FLEET);
    write(
        root,
        "instances.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: windows-instances\n  namespace: default\ndata:\n  10.0.0.1: username=Administrator\n",
    );
    let (code, _, err) = validate(&["--repo", root.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        err.contains("instances.yaml:5:3: /metadata/namespace: the windows-instances ConfigMap is read in namespace openshift-windows-machine-config-operator (WMCO's), not \"default\""),
        "{err}"
    );

    write(root, "instances.yaml", LIST);
    write(
        root,
        "proxy.yaml",
        "apiVersion: config.openshift.io/v1\nkind: Proxy\nmetadata:\n  name: cluster\nspec:\n  httpProxy: http://fleet:s3cr3t-pw@proxy.corp.example:3128\n",
    );
    let (code, out, err) = validate(&["--repo", root.to_str().unwrap()]);
    assert_eq!(code, 0, "a warning: {out}{err}");
    assert!(err.contains("proxy.yaml:6:3: /spec/httpProxy: warning: proxy URL \"http://fleet:<redacted>@proxy.corp.example:3128\" carries a password"), "{err}");
    assert!(!err.contains("s3cr3t-pw") && !out.contains("s3cr3t-pw"), "the password is never shown");
}
