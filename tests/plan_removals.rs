//! The plan's counts and removals tell the truth (issue 29, point 2): an
//! instance that leaves is a deconfigure, never an update; joins and
//! leaves are not safe reboots; the summary agrees with the mass-removal
//! guard the round applies (`plan::guard::removal_guard`, which
//! `reconcile` uses) and the comment warns when it will refuse; a leaving
//! node's section says what its deconfigure does. Real Git revisions, the
//! real binary, exact text.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::fmt::Write;

use support::{GitRepo, winfleet};

fn instances_yaml(addresses: &[&str]) -> String {
    let mut out = String::from(
        "kind: ConfigMap\napiVersion: v1\nmetadata:\n  name: windows-instances\n  namespace: openshift-windows-machine-config-operator\ndata:\n",
    );
    for a in addresses {
        let _ = write!(out, "  {a}: |-\n    username=Administrator\n");
    }
    out
}

fn proxy_yaml(proxy: &str) -> String {
    format!(
        "apiVersion: config.openshift.io/v1\nkind: Proxy\nmetadata:\n  name: cluster\nspec:\n  httpProxy: {proxy}\n"
    )
}

fn mirror_yaml(mirror: &str) -> String {
    format!(
        "apiVersion: config.openshift.io/v1\nkind: ImageDigestMirrorSet\nmetadata:\n  name: redhat\nspec:\n  imageDigestMirrors:\n  - source: registry.redhat.io\n    mirrors:\n    - {mirror}\n"
    )
}

/// Two revisions: each a list of (file, content).
fn repository(base: &[(&str, String)], head: &[(&str, String)]) -> GitRepo {
    let git = GitRepo::new();
    for (files, message) in [(base, "base"), (head, "head")] {
        let dir = tempfile::tempdir().unwrap();
        for (file, content) in files {
            std::fs::write(dir.path().join(file), content).unwrap();
        }
        git.commit_dir(dir.path(), message);
    }
    git
}

fn plan(git: &GitRepo, format: &str) -> String {
    let repo = git.path().to_str().unwrap();
    let (code, out, err) = winfleet(&["plan", "--repo", repo, "--base", "HEAD~1", "--output", format]);
    assert_eq!(code, 2, "{err}");
    out
}

fn summary(git: &GitRepo) -> String {
    let text = plan(git, "text");
    let line = text.lines().rev().find(|l| l.starts_with("Plan: ")).map(str::to_owned);
    let line = line.unwrap_or_else(|| panic!("no summary:\n{text}"));
    assert!(plan(git, "markdown").contains(&format!("**{line}**")), "markdown has the same summary");
    line
}

const NO_MACHINESETS: &str = "MachineSets: 0 to create, 0 to update, 0 to delete.";

#[test]
fn an_instance_that_leaves_counts_as_a_deconfigure_not_an_update() {
    let four = ["192.0.2.10", "192.0.2.11", "192.0.2.12", "192.0.2.13"];
    let git = repository(
        &[("instances.yaml", instances_yaml(&four)), ("mirrors.yaml", mirror_yaml("mirror-a.corp.example"))],
        &[("instances.yaml", instances_yaml(&four[..3])), ("mirrors.yaml", mirror_yaml("mirror-b.corp.example"))],
    );
    assert_eq!(
        summary(&git),
        format!(
            "Plan: 0 to configure, 3 to update, 1 to deconfigure; 4 node(s) changed, 0 safe reboot(s); {NO_MACHINESETS}"
        )
    );
}

#[test]
fn joins_and_leaves_are_not_counted_as_safe_reboots() {
    let base = ["192.0.2.10", "192.0.2.11", "192.0.2.12", "192.0.2.13"];
    let head = ["192.0.2.10", "192.0.2.11", "192.0.2.12", "192.0.2.14"];
    let git = repository(
        &[("instances.yaml", instances_yaml(&base)), ("proxy.yaml", proxy_yaml("http://old.corp.example:3128"))],
        &[("instances.yaml", instances_yaml(&head)), ("proxy.yaml", proxy_yaml("http://new.corp.example:3128"))],
    );
    assert_eq!(
        summary(&git),
        format!(
            "Plan: 1 to configure, 3 to update, 1 to deconfigure; 5 node(s) changed, 3 safe reboot(s); {NO_MACHINESETS}"
        )
    );
    let text = plan(&git, "text");
    assert!(text.contains("Nodes leaving (1): 192.0.2.13\n"), "{text}");
    let markdown = plan(&git, "markdown");
    assert!(
        markdown
            .contains("<summary>1 node(s) leave: `192.0.2.13` — deconfigure, 1 operation(s), then a reboot</summary>"),
        "{markdown}"
    );
    assert!(
        markdown.contains("<summary>1 node(s): `192.0.2.14` — 1 operation(s)</summary>"),
        "a join is no safe reboot:\n{markdown}"
    );
}

#[test]
fn the_summary_says_the_guard_refuses_as_the_round_will_and_the_comment_warns() {
    let all = [
        "192.0.2.10",
        "192.0.2.11",
        "192.0.2.12",
        "192.0.2.13",
        "192.0.2.14",
        "192.0.2.15",
        "192.0.2.16",
        "192.0.2.17",
    ];
    let mirror = mirror_yaml("mirror.corp.example");
    let git = repository(
        &[("instances.yaml", instances_yaml(&all)), ("mirrors.yaml", mirror.clone())],
        &[("instances.yaml", instances_yaml(&all[..2])), ("mirrors.yaml", mirror)],
    );
    assert_eq!(
        summary(&git),
        format!(
            "Plan: 0 to configure, 0 to update, 0 of 6 deconfigured: refused by prune.maxRemovalPercent; 0 node(s) changed, 0 safe reboot(s); {NO_MACHINESETS}"
        )
    );
    // The round's guard, over the instances listed (2) and leaving (6).
    let guard = winfleet::plan::guard::removal_guard(2, 6, 50).expect("the guard refuses");
    assert_eq!(
        guard,
        "this commit would deconfigure 6 of 8 instances (75%), more than prune.maxRemovalPercent (50%): nobody is \
         deconfigured until a commit restores the instances or raises the limit"
    );
    let markdown = plan(&git, "markdown");
    assert!(
        markdown.contains(&format!("> [!WARNING]\n> {guard}; everything else in this change is applied\n")),
        "{markdown}"
    );
    assert!(
        markdown.contains(
            "⚠️ held back: none of this runs, refused by prune.maxRemovalPercent (see the warning)\n\n**Deconfigure**, in this order:\n\n"
        ),
        "{markdown}"
    );
    assert!(markdown.contains("| ➖ | `192.0.2.12`, `192.0.2.13`, `192.0.2.14`, `192.0.2.15`, `192.0.2.16`, `192.0.2.17` | deconfigure, held back by prune.maxRemovalPercent (was in `instances.yaml`) |"), "{markdown}");
    let json: serde_json::Value = serde_json::from_str(&plan(&git, "json")).unwrap();
    assert_eq!(json["deconfigureRefused"], guard.as_str());
}

/// The example repository (services manifest, payload pin, proxy, mirrors)
/// and the same with one instance, winpay02, removed.
fn example_without_winpay02() -> GitRepo {
    let example = support::root().join("examples-repo");
    let git = GitRepo::new();
    git.commit_dir(&example, "base");
    let path = git.path().join("instances/payments.yaml");
    let payments = std::fs::read_to_string(&path).unwrap();
    let (start, end) = (payments.find("  - address: winpay02").unwrap(), payments.find("  - address: 198.51").unwrap());
    std::fs::write(&path, format!("{}{}", &payments[..start], &payments[end..])).unwrap();
    git.commit_all("head");
    git
}

#[test]
fn a_leaving_node_section_lists_what_its_deconfigure_does() {
    let git = example_without_winpay02();
    let markdown = plan(&git, "markdown");
    let expected = "<details><summary>1 node(s) leave: `winpay02.corp.example` — deconfigure, 14 operation(s), then a reboot</summary>

**Deconfigure**, in this order:

1. cordon and drain (pods evicted through the Eviction API)
2. services stopped and deleted: kube-proxy, csi-proxy, hybrid-overlay-node, windows_exporter, kubelet, containerd
3. files removed: exactly what winfleet's install record on the node lists (payload and generated files, kubelet certificates, directories winfleet created, when empty), and 5 registry directories
4. proxy variables removed: HTTP_PROXY, HTTPS_PROXY, NO_PROXY; then a reboot
5. the Node object deleted (with a cluster; without one the hosts stay configured)

➖ `C:\\k\\containerd\\registries\\docker-mirror.internal` (registry directory removed)
";
    assert!(markdown.contains(expected), "{markdown}");
    assert!(markdown.contains("➖ service `kubelet` (stopped and deleted)\n"), "{markdown}");
    assert!(
        !markdown.contains("[!WARNING]\n> proxy environment changes"),
        "a leaving node's reboot is no safe reboot:\n{markdown}"
    );
    let text = plan(&git, "text");
    assert!(text.contains(
        "Nodes leaving (1): winpay02.corp.example
  deconfigure: cordon and drain (pods evicted through the Eviction API)
  deconfigure: services stopped and deleted: kube-proxy, csi-proxy, hybrid-overlay-node, windows_exporter, kubelet, containerd
"
    ), "{text}");
    assert!(text.ends_with(&format!("Plan: 0 to configure, 0 to update, 1 to deconfigure; 1 node(s) changed, 0 safe reboot(s); {NO_MACHINESETS}\n")), "{text}");
}
