//! Prerequisites refused plainly (issue 27, item 6, the node side): a host
//! whose host name is not an RFC 1123 label is refused before anything is
//! written to it, with the reason in `plan --live` and `apply`; the other
//! hosts go on. Real sshd nodes, each with its own kernel host name (a UTS
//! namespace: needs root), SSH-only. The Windows build check is the same
//! path for PowerShell nodes (unit tests in src/node/prerequisites.rs).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::fs;
use std::path::Path;

use support::fleet::TestFleet;
use support::winfleet;

fn repo(fleet: &TestFleet) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("fleet.yaml"), fleet.fleet_yaml()).unwrap();
    let mut list = String::from(
        "apiVersion: winfleet.io/v1alpha1\nkind: WindowsInstanceList\nmetadata:\n  name: test\nspec:\n  instances:\n",
    );
    for node in &fleet.nodes {
        list.push_str(&format!("  - address: {}\n", node.address));
    }
    fs::write(dir.path().join("instances.yaml"), list).unwrap();
    let mirrors = "apiVersion: config.openshift.io/v1\nkind: ImageDigestMirrorSet\nmetadata:\n  name: mirrors\nspec:\n  imageDigestMirrors:\n  - source: quay.io\n    mirrors:\n    - mirror.corp.example/quay\n";
    fs::write(dir.path().join("mirrors.yaml"), mirrors).unwrap();
    for args in
        [&["init", "-q"][..], &["add", "-A"], &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "r"]]
    {
        let status = std::process::Command::new("git").current_dir(dir.path()).args(args).status().unwrap();
        assert!(status.success());
    }
    dir
}

fn run(command: &str, fleet: &TestFleet, repo: &Path) -> (i32, String, String) {
    let mut args = vec![command];
    args.push(if command == "plan" { "--live" } else { "--once" });
    let (key, known) = (fleet.key.to_str().unwrap(), fleet.known_hosts.to_str().unwrap());
    args.extend(["--repo", repo.to_str().unwrap(), "--ssh-key", key, "--known-hosts", known]);
    winfleet(&args)
}

#[test]
fn a_host_name_that_is_no_rfc_1123_label_is_refused_and_nothing_is_written() {
    let fleet = TestFleet::start_named(&["win-0.corp", "good-name"]);
    let repo = repo(&fleet);
    let before = fleet.nodes[0].files();

    let (_, out, err) = run("plan", &fleet, repo.path());
    assert!(out.contains("win-0.corp") && out.contains("is not an RFC 1123 label"), "{out}{err}");
    assert!(out.contains("prerequisites not met, nothing written"), "{out}");

    let (code, out, err) = run("apply", &fleet, repo.path());
    assert_ne!(code, 0, "a refused node fails the run: {out}{err}");
    assert!(out.contains("rename the host"), "{out}{err}");
    assert_eq!(fleet.nodes[0].files(), before, "nothing was written to the refused host");
    let hosts = fleet.nodes[1].read("certs.d/quay.io/hosts.toml").expect("the other host is configured");
    assert!(hosts.contains("mirror.corp.example"), "{hosts}");
}
