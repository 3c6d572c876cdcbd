//! Issue 23, defect 8: what a crash leaves of winfleet's own on a node (a
//! partial upload in `<dir>/.winfleet-staging`, an empty staging directory,
//! the temporary file of a half-done write) is removed by the next round, on
//! real sshd nodes; only winfleet's own names next to files winfleet writes
//! (by the spec, or by the install record), never a file of someone else's
//! that is merely named alike.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;

use support::daemon::pool;
use support::engine::operation_lines;
use support::fleet::{TestFleet, TestNode};
use winfleet::desired::model::Instance;
use winfleet::engine::{self, NodeContext};
use winfleet::lifecycle::manifest::{PreScript, ServiceDef, ServicesManifest};
use winfleet::lifecycle::{LifecycleDirs, LifecycleSpec, Mode, PayloadState};
use winfleet::node::NodeSpec;
use winfleet::payload::Payload;
use winfleet::vocab::Shell;

fn payload_dir(root: &Path) -> std::path::PathBuf {
    let dir = root.join("payload-src");
    fs::create_dir_all(dir.join("kube-node")).unwrap();
    fs::write(dir.join("kube-node/kubelet"), "#!/bin/sh\nexec sleep 300\n").unwrap();
    fs::set_permissions(dir.join("kube-node/kubelet"), fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(dir.join("hon"), vec![7u8; 300_000]).unwrap();
    fs::write(dir.join("containerd.toml"), "version = 2\n").unwrap();
    dir
}

fn manifest() -> ServicesManifest {
    let kubelet = ServiceDef {
        name: "kubelet".into(),
        command: "payload/kube-node/kubelet --node-ip=NODE_IP".into(),
        node_variables: vec![],
        pre_scripts: vec![PreScript {
            variable: Some("NODE_IP".into()),
            path: "echo 127.0.0.9".into(),
            node_args: vec![],
        }],
        dependencies: vec![],
        bootstrap: true,
        priority: 1,
    };
    ServicesManifest {
        name: "windows-services-test".into(),
        origin: "services.yaml".into(),
        services: vec![kubelet],
        digest: "ab".repeat(32),
        canonical: String::new(),
        services_at: Default::default(),
    }
}

fn instance(fleet: &TestFleet, payload: &PayloadState, leaving: bool) -> Instance {
    let digest = match payload {
        PayloadState::Loaded(p) => p.digest.clone(),
        _ => format!("sha256:{}", "0".repeat(64)),
    };
    let dirs = LifecycleDirs { posix_payload: "payload", posix_units: "units", registries: "certs.d" };
    let mut lifecycle = LifecycleSpec::new(Shell::Posix, &digest, &manifest(), dirs).at_runtime(payload, None);
    if leaving {
        lifecycle = lifecycle.for_deconfigure();
    }
    let mut spec = NodeSpec::empty(Shell::Posix);
    spec.registries_dir = "certs.d".into();
    spec.leaving = leaving;
    spec.lifecycle = Some(Arc::new(lifecycle));
    support::engine::instance_of(fleet, spec)
}

/// A systemctl that only records what it is asked.
const SYSTEMCTL: &str = "#!/bin/sh\necho \"$*\" >> \"$HOME/../systemctl.log\"\n[ \"$1\" = is-active ] && { shift; for u in \"$@\"; do [ \"$u\" = -- ] || echo inactive; done; exit 3; }\nexit 0\n";

/// The node's user owns `rel` and the directories leading to it, as if
/// the node had made them (the tests run as another user).
fn own(node: &TestNode, rel: &str) {
    let home = fs::metadata(node.path("")).unwrap();
    let mut prefix = std::path::PathBuf::new();
    for part in Path::new(rel).components() {
        prefix.push(part);
        std::os::unix::fs::chown(node.path(prefix.to_str().unwrap()), Some(home.uid()), Some(home.gid())).unwrap();
    }
}

fn write(node: &TestNode, rel: &str, content: &str) {
    let path = node.path(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, content).unwrap();
    own(node, rel);
}

fn mkdir(node: &TestNode, rel: &str) {
    fs::create_dir_all(node.path(rel)).unwrap();
    own(node, rel);
}

/// What a crash leaves of winfleet's own in the directories it manages.
const LEFTOVERS: [&str; 3] =
    ["payload/kube-node/.winfleet-staging", "payload/.winfleet-staging", "units/.kubelet.service.winfleet-tmp"];

/// Leaves what a crash would (a partial upload, an empty staging
/// directory, a half-written unit) and what someone else keeps under
/// winfleet's names: outside winfleet's directories, or in one of them but
/// not next to any file winfleet writes.
fn crash(node: &TestNode) {
    write(node, "payload/kube-node/.winfleet-staging/kubelet", "#!/bin/sh\nexec sl");
    mkdir(node, "payload/.winfleet-staging");
    write(node, "units/.kubelet.service.winfleet-tmp", "[Unit]\nDescri");
    write(node, "elsewhere/.winfleet-staging/kubelet", "someone else's");
    write(node, "elsewhere/.kubelet.service.winfleet-tmp", "someone else's");
    write(node, "payload/.notes.winfleet-tmp", "someone else's, beside winfleet's files");
}

fn without_leftovers(files: Vec<(String, String)>) -> Vec<(String, String)> {
    files.into_iter().filter(|(rel, _)| !LEFTOVERS.iter().any(|l| rel.starts_with(l))).collect()
}

#[test]
fn issue_23_the_next_round_removes_a_crashs_staging_leftovers_and_nothing_else() {
    let fleet = TestFleet::start(1);
    let node = &fleet.nodes[0];
    node.shim("systemctl", SYSTEMCTL);
    let payload = Arc::new(Payload::load(&payload_dir(fleet.dir())).unwrap());
    let instance = instance(&fleet, &PayloadState::Loaded(payload), false);
    let pool = pool(&fleet);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let prepare = NodeContext { mode: Some(Mode::Prepare), ..NodeContext::default() };
    let first = runtime.block_on(engine::node(&pool, &instance, false, &prepare));
    assert!(operation_lines(&first).iter().all(|o| o.ends_with(": applied")), "{:#?}", operation_lines(&first));

    crash(node);
    let before = without_leftovers(node.files());
    let second = runtime.block_on(engine::node(&pool, &instance, false, &prepare));
    let mut ops = operation_lines(&second);
    ops.sort();
    assert_eq!(
        ops,
        vec![
            "- payload/.winfleet-staging/ (staging left by an interrupted upload): applied",
            "- payload/kube-node/.winfleet-staging/ (staging left by an interrupted upload): applied",
            "- units/.kubelet.service.winfleet-tmp (temporary file left by an interrupted write): applied",
        ],
        "only the leftovers go"
    );
    for leftover in LEFTOVERS {
        assert!(!node.path(leftover).exists(), "{leftover} is gone");
    }
    assert_eq!(node.files(), before, "nothing else was touched, someone else's look-alikes included");
    assert_eq!(second.lifecycle.as_ref().unwrap().uploaded_bytes, 0, "nothing was uploaded again");

    let third = runtime.block_on(engine::node(&pool, &instance, false, &prepare));
    assert_eq!(operation_lines(&third), Vec::<String>::new(), "the round after writes nothing");
}

#[test]
fn issue_23_a_staging_directory_an_upload_uses_this_round_is_left_to_the_next_round() {
    let fleet = TestFleet::start(1);
    let node = &fleet.nodes[0];
    node.shim("systemctl", SYSTEMCTL);
    let payload = Arc::new(Payload::load(&payload_dir(fleet.dir())).unwrap());
    let instance = instance(&fleet, &PayloadState::Loaded(payload), false);
    let pool = pool(&fleet);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let prepare = NodeContext { mode: Some(Mode::Prepare), ..NodeContext::default() };
    runtime.block_on(engine::node(&pool, &instance, false, &prepare));

    // A crash left a partial upload of a file that was since renamed in
    // the payload; this round uploads hon into the same staging directory.
    write(node, "payload/.winfleet-staging/old-name", "partial");
    write(node, "payload/hon", "corrupted");
    let second = runtime.block_on(engine::node(&pool, &instance, false, &prepare));
    let ops = operation_lines(&second);
    assert_eq!(ops.len(), 1, "the upload only: {ops:#?}");
    assert!(ops[0].starts_with("~ payload/hon (upload hon, 293.0 KiB): applied"), "{ops:#?}");
    assert_eq!(fs::read(node.path("payload/hon")).unwrap(), vec![7u8; 300_000]);
    assert!(node.path("payload/.winfleet-staging/old-name").exists(), "kept while an upload used the directory");

    let third = runtime.block_on(engine::node(&pool, &instance, false, &prepare));
    assert_eq!(
        operation_lines(&third),
        vec!["- payload/.winfleet-staging/ (staging left by an interrupted upload): applied"],
        "the next round removes it"
    );
    assert!(!node.path("payload/.winfleet-staging").exists());
}

/// A leaving node without the payload at hand (its files are not in the
/// spec): the install record says which directories are winfleet's, so
/// their leftovers go and the directories winfleet created can go too.
#[test]
fn issue_23_deconfigure_removes_the_leftovers_in_recorded_directories_so_they_can_go() {
    let fleet = TestFleet::start(1);
    let node = &fleet.nodes[0];
    node.shim("systemctl", SYSTEMCTL);
    let payload = Arc::new(Payload::load(&payload_dir(fleet.dir())).unwrap());
    let pool = pool(&fleet);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let prepare = NodeContext { mode: Some(Mode::Prepare), ..NodeContext::default() };
    runtime.block_on(engine::node(&pool, &instance(&fleet, &PayloadState::Loaded(payload), false), false, &prepare));
    assert!(node.path("payload/kube-node/kubelet").exists());

    crash(node);
    let leaving = instance(&fleet, &PayloadState::Missing, true);
    assert!(leaving.spec.lifecycle.as_ref().unwrap().files.is_empty(), "the spec names no payload file");
    let deconfigure = NodeContext { mode: Some(Mode::Deconfigure), ..NodeContext::default() };
    let report = runtime.block_on(engine::node(&pool, &leaving, false, &deconfigure));
    let ops = operation_lines(&report);
    assert!(ops.iter().all(|o| o.ends_with(": applied") || o.ends_with(": unchanged")), "{ops:#?}");
    for leftover in LEFTOVERS {
        assert!(!node.path(leftover).exists(), "{leftover} is gone: {ops:#?}");
    }
    for dir in ["payload/kube-node", "units", ".winfleet"] {
        assert!(!node.path(dir).exists(), "{dir}, winfleet's, is gone: {ops:#?}");
    }
    let mut rest: Vec<String> = node.files().into_iter().map(|(rel, _)| rel).collect();
    rest.retain(|rel| !rel.starts_with(".ssh/") && !rel.starts_with(".cache/"));
    assert_eq!(
        rest,
        vec![
            "elsewhere/.kubelet.service.winfleet-tmp",
            "elsewhere/.winfleet-staging/kubelet",
            "payload/.notes.winfleet-tmp",
        ],
        "someone else's stay"
    );
}
