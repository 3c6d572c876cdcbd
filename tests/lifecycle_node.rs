//! The node lifecycle on real sshd nodes, without a cluster: payload files
//! uploaded over SFTP, checked and renamed into place, systemd units
//! written, everything recorded, and a second round that writes nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use support::daemon::pool;
use support::engine::operation_lines;
use support::fleet::TestFleet;
use winfleet::desired::model::Instance;
use winfleet::engine::report::NodeResult;
use winfleet::engine::{self, NodeContext};
use winfleet::lifecycle::manifest::{NodeJsonPath, NodeVariable, PreScript, ServiceDef, ServicesManifest};
use winfleet::lifecycle::{LifecycleDirs, LifecycleSpec, Mode, PayloadState};
use winfleet::node::NodeSpec;
use winfleet::payload::Payload;
use winfleet::vocab::Shell;
use winfleet::vocab::operation::Operation;

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
    let service = |name: &str, command: &str, bootstrap, priority, deps: &[&str]| ServiceDef {
        name: name.into(),
        command: command.into(),
        node_variables: vec![],
        pre_scripts: vec![],
        dependencies: deps.iter().map(|d| (*d).to_owned()).collect(),
        bootstrap,
        priority,
    };
    let mut kubelet = service("kubelet", "payload/kube-node/kubelet --node-ip=NODE_IP", true, 1, &[]);
    kubelet.pre_scripts.push(PreScript {
        variable: Some("NODE_IP".into()),
        path: "echo 127.0.0.9".into(),
        node_args: vec![],
    });
    let mut hon = service("hybrid-overlay-node", "payload/hon --node NODE_NAME", false, 2, &["kubelet"]);
    hon.node_variables
        .push(NodeVariable { name: "NODE_NAME".into(), path: NodeJsonPath::parse("{.metadata.name}").unwrap() });
    ServicesManifest {
        name: "windows-services-test".into(),
        origin: "services.yaml".into(),
        services: vec![kubelet, hon],
        digest: "ab".repeat(32),
        canonical: String::new(),
        services_at: Default::default(),
    }
}

fn instance(fleet: &TestFleet, payload: &PayloadState) -> Instance {
    let digest = match payload {
        PayloadState::Loaded(p) => p.digest.clone(),
        _ => format!("sha256:{}", "0".repeat(64)),
    };
    let dirs = LifecycleDirs { posix_payload: "payload", posix_units: "units", registries: "certs.d" };
    let lifecycle = LifecycleSpec::new(Shell::Posix, &digest, &manifest(), dirs).at_runtime(payload, None);
    let mut spec = NodeSpec::empty(Shell::Posix);
    spec.registries_dir = "certs.d".into();
    spec.lifecycle = Some(Arc::new(lifecycle));
    support::engine::instance_of(fleet, spec)
}

/// A systemctl that only records what it is asked.
const SYSTEMCTL: &str = "#!/bin/sh\necho \"$*\" >> \"$HOME/../systemctl.log\"\n[ \"$1\" = is-active ] && { shift; for u in \"$@\"; do [ \"$u\" = -- ] || echo inactive; done; exit 3; }\nexit 0\n";

#[test]
fn ssh_only_configure_uploads_the_payload_and_defines_services_then_writes_nothing() {
    let fleet = TestFleet::start(1);
    let node = &fleet.nodes[0];
    node.shim("systemctl", SYSTEMCTL);
    let payload = Arc::new(Payload::load(&payload_dir(fleet.dir())).unwrap());
    let state = PayloadState::Loaded(Arc::clone(&payload));
    let instance = instance(&fleet, &state);
    let pool = pool(&fleet);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let prepare = NodeContext { mode: Some(Mode::Prepare), ..NodeContext::default() };
    let first = runtime.block_on(engine::node(&pool, &instance, false, &prepare));
    let ops = operation_lines(&first);
    assert!(ops.iter().all(|o| o.ends_with(": applied")), "{ops:#?}");
    assert!(ops.iter().any(|o| o.starts_with("+ payload/kube-node/kubelet (upload kube-node/kubelet")), "{ops:#?}");
    assert!(
        ops.iter().any(|o| o.starts_with("+ service kubelet: payload/kube-node/kubelet --node-ip=127.0.0.9")),
        "{ops:#?}"
    );
    assert!(!ops.iter().any(|o| o.contains("hybrid-overlay-node")), "needs its Node: {ops:#?}");
    assert!(!ops.iter().any(|o| o.contains("start")), "SSH-only mode starts nothing: {ops:#?}");
    // `hon` compresses on the wire (tests/wire_compression.rs).
    let sent = first.lifecycle.as_ref().unwrap().uploaded_bytes;
    assert!(sent > 0 && sent < payload.size(), "{sent} bytes sent of {}", payload.size());
    for file in &payload.files {
        let on_node = fs::read(node.path(&format!("payload/{}", file.rel))).unwrap();
        assert_eq!(on_node, fs::read(&file.source).unwrap(), "{}", file.rel);
    }
    let mode = fs::metadata(node.path("payload/kube-node/kubelet")).unwrap().permissions().mode();
    assert_eq!(mode & 0o111, 0o111, "the kubelet stays executable: {mode:o}");
    assert!(!node.path("payload/kube-node/.winfleet-staging").exists(), "staging is cleaned up");
    let unit = node.read("units/kubelet.service").unwrap();
    assert!(
        unit.contains(&format!(
            "ExecStart={}/payload/kube-node/kubelet --node-ip=127.0.0.9\n",
            node.path("").display().to_string().trim_end_matches('/')
        )),
        "{unit}"
    );
    let record = node.read(".winfleet/install-record").unwrap();
    for line in ["dir payload", "dir units", "dir payload/kube-node", "service kubelet"] {
        assert!(record.lines().any(|l| l == line), "{line:?} missing from the record:\n{record}");
    }
    assert!(record.contains(&format!(
        "file {} payload/kube-node/kubelet",
        payload.files.iter().find(|f| f.rel == "kube-node/kubelet").unwrap().sha256
    )));
    let log = fs::read_to_string(node.dir.join("systemctl.log")).unwrap();
    assert!(log.contains("daemon-reload") && log.contains("enable -- kubelet.service"), "{log}");

    let second = runtime.block_on(engine::node(&pool, &instance, false, &prepare));
    assert_eq!(operation_lines(&second), Vec::<String>::new(), "a second round writes nothing");
    assert_eq!(second.lifecycle.as_ref().unwrap().uploaded_bytes, 0);

    fs::write(node.path("payload/hon"), "corrupted").unwrap();
    let third = runtime.block_on(engine::node(&pool, &instance, false, &prepare));
    let ops = operation_lines(&third);
    assert_eq!(ops.len(), 1, "{ops:#?}");
    assert!(ops[0].starts_with("~ payload/hon (upload hon, 293.0 KiB): applied"), "{ops:#?}");
    assert_eq!(fs::read(node.path("payload/hon")).unwrap(), vec![7u8; 300_000]);
}

#[test]
fn a_payload_that_is_not_the_pinned_one_configures_nothing() {
    let fleet = TestFleet::start(1);
    let payload = Arc::new(Payload::load(&payload_dir(fleet.dir())).unwrap());
    let dirs = LifecycleDirs { posix_payload: "payload", posix_units: "units", registries: "certs.d" };
    let pinned = format!("sha256:{}", "1".repeat(64));
    let lifecycle = LifecycleSpec::new(Shell::Posix, &pinned, &manifest(), dirs)
        .at_runtime(&PayloadState::Loaded(Arc::clone(&payload)), None);
    let mut instance = instance(&fleet, &PayloadState::Missing);
    let mut spec = (*instance.spec).clone();
    spec.lifecycle = Some(Arc::new(lifecycle));
    instance.spec = Arc::new(spec);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let report = runtime.block_on(engine::node(&pool(&fleet), &instance, false, &NodeContext::default()));
    assert!(report.failed());
    let error = report.lifecycle.as_ref().unwrap().error.clone().unwrap();
    assert!(error.contains(&payload.digest) && error.contains(&pinned), "names both digests: {error}");
    assert!(
        matches!(&report.result, NodeResult::Done { operations, .. } if operations.iter().all(|o| !matches!(o.operation, Operation::UploadFile { .. })))
    );
    assert!(!fleet.nodes[0].path("payload").exists(), "nothing was configured");
}

/// The directories are made by one `mkdir`; when one cannot be made, it
/// alone fails, with the reason, and the others are made all the same.
#[test]
fn a_directory_that_cannot_be_made_fails_alone_with_the_reason() {
    let fleet = TestFleet::start(1);
    let node = &fleet.nodes[0];
    node.shim("systemctl", SYSTEMCTL);
    fs::write(node.path("units"), "a file where the units directory goes").unwrap();
    let payload = Arc::new(Payload::load(&payload_dir(fleet.dir())).unwrap());
    let instance = instance(&fleet, &PayloadState::Loaded(payload));
    let pool = pool(&fleet);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let prepare = NodeContext { mode: Some(Mode::Prepare), ..NodeContext::default() };
    let first = runtime.block_on(engine::node(&pool, &instance, false, &prepare));
    let ops = operation_lines(&first);
    let dirs: Vec<&String> = ops.iter().filter(|o| o.contains("(directory)")).collect();
    let failed = "+ units/ (directory): failed: mkdir: cannot create directory 'units': File exists";
    assert!(dirs.iter().any(|o| *o == failed), "{ops:#?}");
    assert_eq!(dirs.len(), 4, "{ops:#?}");
    assert!(dirs.iter().filter(|o| **o != failed).all(|o| o.ends_with(": applied")), "{ops:#?}");
    assert!(node.path("payload/kube-node").is_dir(), "the other directories are made: {ops:#?}");
    fs::remove_file(node.path("units")).unwrap();
    let second = runtime.block_on(engine::node(&pool, &instance, false, &prepare));
    let ops = operation_lines(&second);
    assert!(ops.iter().any(|o| o == "+ units/ (directory): applied"), "{ops:#?}");
    assert!(node.path("units/kubelet.service").is_file(), "{ops:#?}");
}
