//! The node engine against real OpenSSH servers (tests/support/fleet.rs):
//! `winfleet apply --once` end to end, posix dialect, every node with its
//! own sshd, host key and home.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::fleet::{TestFleet, TestNode};
use support::node_repo::{Repo, apply, apply_with, path};

/// (inode, mtime ns) of every file in a node's home: a rewrite changes both.
fn stamps(node: &TestNode) -> BTreeMap<String, (u64, i64)> {
    node.files()
        .into_iter()
        .map(|(rel, _)| {
            let meta = fs::metadata(node.path(&rel)).unwrap();
            (rel, (meta.ino(), meta.mtime_nsec() + meta.mtime() * 1_000_000_000))
        })
        .collect()
}

fn registries_on(node: &TestNode) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    let Ok(entries) = fs::read_dir(node.path("certs.d")) else { return found };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        found.insert(name.clone(), node.read(&format!("certs.d/{name}/hosts.toml")).unwrap_or_default());
    }
    found
}

const QUAY: (&str, &[&str]) = ("quay.io/openshift", &["mirror.example.com/openshift"]);
const REDHAT: (&str, &[&str]) = ("registry.redhat.io", &["mirror.example.com", "backup.example.com"]);
const LOCAL: (&str, &[&str]) = ("registry.local:5000/team", &["mirror.example.com/team"]);

#[test]
fn first_apply_writes_everything_and_an_immediate_second_apply_writes_nothing() {
    let fleet = TestFleet::start(3);
    let repo = Repo::new(&fleet);
    repo.mirrors(&[QUAY, REDHAT, LOCAL]);
    repo.proxy("http://proxy.example.com:3128", ".svc,10.0.0.0/16");

    let (code, out, err) = apply(&fleet, &repo, &["--dry-run"]);
    assert_eq!(code, 2, "dry run with changes exits 2\n{out}{err}");
    assert!(out.contains("+ certs.d/quay.io/hosts.toml"), "{out}");
    assert!(fleet.nodes.iter().all(|n| n.files().is_empty()), "a dry run writes nothing");

    let (code, out, err) = apply(&fleet, &repo, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains("SSH-only mode"), "{err}");
    assert!(
        out.contains("Applied: 3 node(s): 0 in sync, 3 changed, 0 failed (3 owe a reboot); operations: 15 applied"),
        "{out}"
    );
    let expected = repo.expected_hosts();
    assert_eq!(expected.len(), 3);
    assert!(expected.contains_key("registry.local:5000"), "posix keeps host:port: {expected:?}");
    for node in &fleet.nodes {
        assert_eq!(registries_on(node), expected, "node {}", node.address);
        let drop_in = node.read("systemd/90-winfleet-environment.conf").unwrap();
        assert!(drop_in.contains("DefaultEnvironment=\"HTTP_PROXY=http://proxy.example.com:3128\"\n"), "{drop_in}");
        assert!(drop_in.contains("DefaultEnvironment=\"NO_PROXY=.svc,10.0.0.0/16\"\n"), "{drop_in}");
        assert!(!node.files().iter().any(|(rel, _)| rel.contains("winfleet-tmp")), "no temporary files left");
    }
    let before: Vec<_> = fleet.nodes.iter().map(stamps).collect();

    let (code, out, err) = apply(&fleet, &repo, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("operations: 0 applied"), "{out}");
    let after: Vec<_> = fleet.nodes.iter().map(stamps).collect();
    assert_eq!(before, after, "the second apply wrote nothing");

    let (code, out, _) = apply(&fleet, &repo, &["--dry-run"]);
    assert_eq!(code, 2, "the reboot owed for the proxy is still a change to make:\n{out}");
    assert!(out.contains("reboot required"), "{out}");
}

#[test]
fn a_changed_mirror_rewrites_only_its_file_and_a_removed_registry_disappears() {
    let fleet = TestFleet::start(2);
    let repo = Repo::new(&fleet);
    repo.mirrors(&[QUAY, REDHAT, LOCAL]);
    assert_eq!(apply(&fleet, &repo, &[]).0, 0);
    for node in &fleet.nodes {
        fs::create_dir_all(node.path("keep")).unwrap();
        fs::write(node.path("keep/notes.txt"), "mine\n").unwrap();
        fs::write(node.path("certs.d/quay.io/ca.crt"), "not winfleet's\n").unwrap();
    }
    let before: Vec<_> = fleet.nodes.iter().map(stamps).collect();

    repo.mirrors(&[QUAY, ("registry.redhat.io", &["mirror.example.com", "other.example.com"]), LOCAL]);
    let (code, out, err) = apply(&fleet, &repo, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("operations: 2 applied"), "one file per node:\n{out}");
    let expected = repo.expected_hosts();
    for (node, before) in fleet.nodes.iter().zip(&before) {
        let after = stamps(node);
        let changed: Vec<&String> = after.keys().filter(|k| before.get(*k) != after.get(*k)).collect();
        assert_eq!(changed, ["certs.d/registry.redhat.io/hosts.toml"], "node {}", node.address);
        assert_eq!(registries_on(node), expected);
    }

    repo.mirrors(&[QUAY]);
    let (code, out, err) = apply(&fleet, &repo, &[]);
    assert_eq!(code, 0, "{out}{err}");
    for node in &fleet.nodes {
        assert_eq!(registries_on(node).keys().collect::<Vec<_>>(), ["quay.io"]);
        assert_eq!(node.read("keep/notes.txt").as_deref(), Some("mine\n"), "unrelated files stay");
        assert_eq!(node.read("certs.d/quay.io/ca.crt").as_deref(), Some("not winfleet's\n"));
    }
}

#[test]
fn environment_variables_are_set_changed_and_unset_with_an_rsa_pem_key() {
    let fleet = TestFleet::start(1);
    let repo = Repo::new(&fleet);
    let node = &fleet.nodes[0];
    let drop_in = || node.read("systemd/90-winfleet-environment.conf").unwrap_or_default();

    repo.proxy("http://proxy.example.com:3128", ".svc");
    let (code, out, err) = apply_with(&repo, &fleet.rsa_key, &fleet.known_hosts, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("+ environment HTTP_PROXY") || out.contains("~ environment HTTP_PROXY"), "{out}");
    assert!(out.contains("reboot required"), "{out}");
    assert!(drop_in().contains("\"HTTP_PROXY=http://proxy.example.com:3128\""));

    repo.proxy("http://other.example.com:8080", ".svc");
    let (code, out, err) = apply_with(&repo, &fleet.rsa_key, &fleet.known_hosts, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(
            "~ environment HTTP_PROXY: \"http://proxy.example.com:3128\" -> \"http://other.example.com:8080\""
        ),
        "{out}"
    );
    assert!(drop_in().contains("\"HTTP_PROXY=http://other.example.com:8080\""));
    assert!(drop_in().contains("\"NO_PROXY=.svc\""));

    repo.remove("proxy.yaml");
    let (code, out, err) = apply_with(&repo, &fleet.rsa_key, &fleet.known_hosts, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("- environment HTTP_PROXY"), "{out}");
    assert!(out.contains("- environment NO_PROXY"), "{out}");
    assert!(!drop_in().contains("DefaultEnvironment"), "{}", drop_in());
}

#[test]
fn an_unreachable_node_fails_alone() {
    let mut fleet = TestFleet::start(3);
    let repo = Repo::new(&fleet);
    repo.mirrors(&[QUAY]);
    fleet.nodes[1].stop();
    let (code, out, err) = apply(&fleet, &repo, &["--connect-timeout", "5"]);
    assert_eq!(code, 1, "{out}{err}");
    let down = &fleet.nodes[1].address;
    assert!(out.contains(&format!("{down}: FAILED (observe): cannot connect to")), "{out}");
    assert!(out.contains("Connection refused"), "{out}");
    assert!(out.contains("2 changed, 1 failed"), "{out}");
    assert_eq!(registries_on(&fleet.nodes[0]).len(), 1);
    assert_eq!(registries_on(&fleet.nodes[2]).len(), 1);
}

#[test]
fn a_changed_host_key_is_refused_and_named() {
    let mut fleet = TestFleet::start(2);
    let repo = Repo::new(&fleet);
    repo.mirrors(&[QUAY]);
    fleet.nodes[0].replace_host_key();
    let (code, out, err) = apply(&fleet, &repo, &["--trust-on-first-use"]);
    assert_eq!(code, 1, "{out}{err}");
    let node = &fleet.nodes[0];
    let line = out.lines().find(|l| l.starts_with(&node.address)).unwrap();
    assert!(line.contains(&format!("host key mismatch for [{}]:{}", node.address, node.port)), "{line}");
    assert_eq!(line.matches("SHA256:").count(), 2, "both fingerprints: {line}");
    assert!(node.files().is_empty(), "nothing was done on the impostor");
    assert_eq!(registries_on(&fleet.nodes[1]).len(), 1);
}

#[test]
fn trust_on_first_use_records_keys_then_enforces_them() {
    let mut fleet = TestFleet::start(2);
    let repo = Repo::new(&fleet);
    repo.mirrors(&[QUAY]);
    let known = fleet.empty_known_hosts("tofu_known_hosts");
    let run = |fleet: &TestFleet, extra: &[&str]| apply_with(&repo, &fleet.key, &known, extra);
    let (code, out, _) = run(&fleet, &[]);
    assert_eq!(code, 1);
    assert!(out.contains("is not in") && out.contains("--trust-on-first-use"), "{out}");

    let (code, out, err) = run(&fleet, &["--trust-on-first-use"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(fs::read_to_string(&known).unwrap().lines().count(), 2, "both keys recorded");

    fleet.nodes[1].replace_host_key();
    let (code, out, _) = run(&fleet, &["--trust-on-first-use"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("host key mismatch"), "{out}");
    assert_eq!(fs::read_to_string(&known).unwrap().lines().count(), 2, "the new key was not recorded");
}

#[test]
fn a_host_recorded_only_by_its_rsa_key_is_asked_for_that_key() {
    let mut fleet = TestFleet::start(1);
    let repo = Repo::new(&fleet);
    repo.mirrors(&[QUAY]);
    let line = fleet.nodes[0].add_rsa_host_key();
    let known = fleet.empty_known_hosts("rsa_known_hosts");
    fs::write(&known, line).unwrap();
    let (code, out, err) = apply_with(&repo, &fleet.key, &known, &[]);
    assert_eq!(code, 0, "{out}{err}");
}

const HOSTILE: &str = "'q',\"dq\",$(touch${IFS}PWNED1),`touch${IFS}PWNED2`,a;touch${IFS}PWNED3,b&&touch${IFS}PWNED4,c|touch${IFS}PWNED5,%PATH%,$HOME,\\n,ünïcödé-✓,../../etc/passwd";

/// noProxy entries validation accepts (issue 35 refuses the hostile ones
/// at validate: `hostile_values_that_validation_refuses_never_reach_a_node`;
/// the dialect's escaping of HOSTILE itself is checked below, from a spec).
const NO_PROXY: &str = ".example.com,10.0.0.0/8,internal.corp:8443,*";

#[test]
fn hostile_proxy_values_arrive_verbatim_and_do_nothing_else() {
    let fleet = TestFleet::start(1);
    let repo = Repo::new(&fleet);
    let http = "http://us'er:p\"a$(touch${IFS}PWNED6)`x`;|&%41@proxy.example.com:3128";
    repo.proxy(http, NO_PROXY);
    repo.mirrors(&[QUAY]);
    let (code, out, err) = apply(&fleet, &repo, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains("p\"a$(touch"), "the proxy password is redacted:\n{out}");
    let node = &fleet.nodes[0];
    let content = node.read("systemd/90-winfleet-environment.conf").unwrap();
    let parsed = winfleet::vocab::systemd::parse_drop_in(&content);
    assert_eq!(parsed.environment.get("HTTP_PROXY").map(String::as_str), Some(http));
    assert_eq!(parsed.environment.get("NO_PROXY").map(String::as_str), Some(NO_PROXY));
    assert_no_side_effects(node);
    let (code, out, _) = apply(&fleet, &repo, &[]);
    assert_eq!(code, 0);
    assert!(out.contains("operations: 0 applied"), "the values read back equal: {out}");
}

#[test]
fn hostile_values_that_validation_refuses_never_reach_a_node() {
    let fleet = TestFleet::start(1);
    let repo = Repo::new(&fleet);
    repo.mirrors(&[("quay.io/$(touch PWNED)", &["mirror.example.com;touch PWNED"]), ("../../etc", &["a\"b"])]);
    repo.proxy("http://proxy.example.com:3128", HOSTILE);
    let (code, out, err) = apply(&fleet, &repo, &[]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("mirrors.yaml") && err.contains("proxy.yaml"), "every problem at once:\n{err}");
    assert!(err.contains("nothing was applied"), "{err}");
    assert!(err.contains("noProxy entry \"$(touch${IFS}PWNED1)\" is not a domain"), "{err}");
    assert!(fleet.nodes[0].files().is_empty());
}

/// The dialect itself, below validation: hostile registry names, paths and
/// contents in a hand-made NodeSpec are written exactly and read back equal.
#[test]
fn the_posix_dialect_carries_any_bytes_exactly() {
    use winfleet::desired::model::Instance;
    use winfleet::node::NodeSpec;
    use winfleet::vocab::Shell;
    use winfleet::vocab::file::ManagedFile;

    let fleet = TestFleet::start(1);
    let node = &fleet.nodes[0];
    let weird_dir = "we'ird \"dir\" $(touch PWNED7) `touch PWNED8`; ü";
    let names = ["a'b\"c", "$(touch PWNED9)", "x;touch PWNED10&&y|z", "new\nline", "%PATH%"];
    let spec = NodeSpec {
        shell: Shell::Posix,
        registries_dir: weird_dir.to_owned(),
        registries: names
            .iter()
            .map(|n| (n.to_string(), ManagedFile::plain(format!("content of {n}: '\"$(x)`y`\\n\n\0end"))))
            .collect(),
        environment: [("NO_PROXY".to_owned(), HOSTILE.to_owned())].into(),
        environment_dir: Some("env $(touch PWNED11)".to_owned()),
        services: vec!["containerd".into()],
        lifecycle: None,
        leaving: false,
        max_removal_percent: 50,
    };
    let instance = Instance {
        address: node.address.clone(),
        username: fleet.user.clone(),
        port: node.port,
        shell: Shell::Posix,
        labels: Default::default(),
        annotations: Default::default(),
        taints: Vec::new(),
        origin: "test".into(),
        spec: std::sync::Arc::new(spec.clone()),
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let pool = winfleet::ssh::Pool::new(
        winfleet::ssh::load_key(&fleet.key).unwrap(),
        winfleet::ssh::KnownHosts::load(&fleet.known_hosts, false).unwrap(),
        Default::default(),
    );
    let first = runtime.block_on(winfleet::engine::node(&pool, &instance, false, &Default::default()));
    assert_eq!(first.counts().applied, 6, "{first:?}");
    for name in names {
        let file = node.path(&format!("{weird_dir}/{name}/hosts.toml"));
        assert_eq!(fs::read(&file).unwrap(), spec.registries[name].content().as_bytes(), "{name:?}");
    }
    let second = runtime.block_on(winfleet::engine::node(&pool, &instance, false, &Default::default()));
    let winfleet::engine::report::NodeResult::Done { operations, .. } = &second.result else { panic!("{second:?}") };
    assert!(operations.is_empty(), "everything read back equal: {operations:?}");
    assert_no_side_effects(node);
    runtime.block_on(pool.close());
}

fn assert_no_side_effects(node: &TestNode) {
    let files = node.files();
    let ran = |rel: &String| rel.rsplit('/').next().is_some_and(|name| name.starts_with("PWNED"));
    assert!(!files.iter().any(|(rel, _)| ran(rel)), "a command ran: {files:?}");
    assert!(!node.dir.join("PWNED1").exists());
}

#[test]
fn a_connection_cut_during_apply_leaves_no_half_written_file_and_the_next_round_converges() {
    let fleet = TestFleet::start(1);
    let repo = Repo::new(&fleet);
    repo.mirrors(&[QUAY, REDHAT]);
    assert_eq!(apply(&fleet, &repo, &[]).0, 0);
    let old = registries_on(&fleet.nodes[0]);
    let node = &fleet.nodes[0];
    // A slow node: the first file's content is in its temporary file, then
    // the rename stalls.
    node.shim(
        "mv",
        &format!(
            "#!/bin/sh\nif [ -e '{slow}' ]; then sleep 30; fi\nexec /bin/mv \"$@\"\n",
            slow = node.dir.join("slow").display()
        ),
    );
    fs::write(node.dir.join("slow"), "").unwrap();
    repo.mirrors(&[
        ("quay.io/openshift", &["elsewhere.example.com/openshift"]),
        ("registry.redhat.io", &["x.example.com"]),
    ]);
    let new = repo.expected_hosts();

    let child = Command::new(env!("CARGO_BIN_EXE_winfleet"))
        .args(["apply", "--once", "--repo", repo.path(), "--ssh-key", path(&fleet.key)])
        .args(["--known-hosts", path(&fleet.known_hosts)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let temp = partial_temp_file(node);
    node.cut_session();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("FAILED (apply)") || stdout.contains("failed: no outcome"), "{stdout}");
    for (name, content) in registries_on(node) {
        assert!(content == old[&name] || content == new[&name], "{name} is whole: {content:?}");
    }
    assert!(
        !registries_on(node).values().any(|c| fs::read_to_string(&temp).is_ok_and(|t| &t == c)),
        "the partial file never replaced a target"
    );

    fs::remove_file(node.dir.join("slow")).unwrap();
    let (code, out, err) = apply(&fleet, &repo, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(registries_on(node), new);
    assert!(!node.files().iter().any(|(rel, _)| rel.contains("winfleet-tmp")), "{:?}", node.files());
    let (_, out, _) = apply(&fleet, &repo, &[]);
    assert!(out.contains("operations: 0 applied"), "{out}");
}

/// Waits until a temporary file holds a new hosts.toml.
fn partial_temp_file(node: &TestNode) -> PathBuf {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        for (rel, content) in node.files() {
            if rel.ends_with(".hosts.toml.winfleet-tmp") && !content.is_empty() {
                return node.path(&rel);
            }
        }
        assert!(Instant::now() < deadline, "the apply never started writing: {:?}", node.files());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn nodes_can_be_selected_and_json_is_versioned() {
    let fleet = TestFleet::start(2);
    let repo = Repo::new(&fleet);
    repo.mirrors(&[QUAY]);
    let first = fleet.nodes[0].address.clone();
    let (code, out, err) = apply(&fleet, &repo, &["--nodes", &first, "--output", "json", "--max-parallel", "1"]);
    assert_eq!(code, 0, "{out}{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["formatVersion"], 1);
    assert_eq!(json["nodes"].as_array().unwrap().len(), 1);
    assert_eq!(json["nodes"][0]["address"], first.as_str());
    assert_eq!(json["nodes"][0]["state"], "done");
    assert_eq!(json["nodes"][0]["operations"][0]["outcome"], "applied");
    assert!(fleet.nodes[1].files().is_empty());

    let (code, _, err) = apply(&fleet, &repo, &["--nodes", "10.9.9.9"]);
    assert_eq!(code, 1);
    assert!(err.contains("10.9.9.9"), "{err}");
}
