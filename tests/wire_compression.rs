//! Compression on the wire (issue 30, point 1) on real sshd nodes: payload
//! files that compress are sent gzip-encoded and decoded on the node before
//! their SHA-256 is checked; the others are sent as they are. The node ends
//! up with byte-identical files, fewer bytes cross the wire than the
//! payload holds, and an encoded upload that does not decode is refused by
//! the digest check with nothing replaced.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use support::daemon::pool;
use support::engine::operation_lines;
use support::fleet::TestFleet;
use winfleet::desired::model::Instance;
use winfleet::engine::report::NodeReport;
use winfleet::engine::{self, NodeContext};
use winfleet::lifecycle::manifest::ServicesManifest;
use winfleet::lifecycle::{LifecycleDirs, LifecycleSpec, Mode, PayloadState};
use winfleet::node::NodeSpec;
use winfleet::payload::Payload;
use winfleet::ssh::Pool;
use winfleet::vocab::Shell;

/// Bytes gzip cannot shrink (xorshift).
fn noise(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn payload_dir(root: &Path) -> PathBuf {
    let dir = root.join("payload-src");
    for sub in ["conf", "bin", "images"] {
        fs::create_dir_all(dir.join(sub)).unwrap();
    }
    let text: String = (0..40_000).map(|i| format!("--flag-{i}=value-{}\n", i % 97)).collect();
    fs::write(dir.join("conf/kubelet.conf"), text).unwrap();
    fs::write(dir.join("bin/kubelet"), noise(400_000)).unwrap();
    fs::write(dir.join("images/layer.zst"), vec![0u8; 200_000]).unwrap();
    fs::write(dir.join("hon"), vec![7u8; 300_000]).unwrap();
    dir
}

fn instance(fleet: &TestFleet, payload: &Arc<Payload>) -> Instance {
    let manifest = ServicesManifest {
        name: "windows-services-test".into(),
        origin: "services.yaml".into(),
        services: vec![],
        digest: "ab".repeat(32),
        canonical: String::new(),
        services_at: Default::default(),
    };
    let dirs = LifecycleDirs { posix_payload: "payload", posix_units: "units", registries: "certs.d" };
    let state = PayloadState::Loaded(Arc::clone(payload));
    let lifecycle = LifecycleSpec::new(Shell::Posix, &payload.digest, &manifest, dirs).at_runtime(&state, None);
    let mut spec = NodeSpec::empty(Shell::Posix);
    spec.registries_dir = "certs.d".into();
    spec.lifecycle = Some(Arc::new(lifecycle));
    support::engine::instance_of(fleet, spec)
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

/// No `.winfleet-gz` and no staging directory left anywhere under `dir`.
fn assert_clean(dir: &Path) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(!name.ends_with(".winfleet-gz") && name != ".winfleet-staging", "left behind: {}", path.display());
        if path.is_dir() {
            assert_clean(&path);
        }
    }
}

/// One sshd node, the payload of [`payload_dir`] and its instance.
struct Wire {
    fleet: TestFleet,
    payload: Arc<Payload>,
    instance: Instance,
    pool: Pool,
    runtime: tokio::runtime::Runtime,
}

impl Wire {
    fn start() -> Self {
        let fleet = TestFleet::start(1);
        let payload = Arc::new(Payload::load(&payload_dir(fleet.dir())).unwrap());
        let instance = instance(&fleet, &payload);
        let pool = pool(&fleet);
        Wire { fleet, payload, instance, pool, runtime: tokio::runtime::Runtime::new().unwrap() }
    }

    /// One node round preparing the node (the payload uploaded).
    fn prepare(&self) -> NodeReport {
        let prepare = NodeContext { mode: Some(Mode::Prepare), ..NodeContext::default() };
        self.runtime.block_on(engine::node(&self.pool, &self.instance, false, &prepare))
    }
}

#[test]
fn a_compressible_payload_crosses_the_wire_smaller_and_arrives_byte_identical() {
    let wire = Wire::start();
    let (node, payload) = (&wire.fleet.nodes[0], &wire.payload);

    let first = wire.prepare();
    let ops = operation_lines(&first);
    assert!(!ops.is_empty() && ops.iter().all(|o| o.ends_with(": applied")), "{ops:#?}");
    for file in &payload.files {
        let on_node = fs::read(node.path(&format!("payload/{}", file.rel))).unwrap();
        assert!(on_node == fs::read(&file.source).unwrap(), "{} differs on the node", file.rel);
    }
    assert_clean(&node.path("payload"));
    let sent = first.lifecycle.as_ref().unwrap().uploaded_bytes;
    let raw = |rel: &str| payload.files.iter().find(|f| f.rel == rel).unwrap().size;
    // The noise and the .zst go as they are; the text and `hon` shrink.
    let as_is = raw("bin/kubelet") + raw("images/layer.zst");
    assert!(sent > as_is, "{sent} bytes sent, {as_is} of them sent as they are");
    assert!(sent < as_is + (raw("conf/kubelet.conf") + raw("hon")) / 4, "{sent} of {} bytes", payload.size());
    assert!(sent < payload.size(), "{sent} bytes on the wire for a {}-byte payload", payload.size());

    let second = wire.prepare();
    assert_eq!(operation_lines(&second), Vec::<String>::new(), "a second round writes nothing");
    assert_eq!(second.lifecycle.as_ref().unwrap().uploaded_bytes, 0);
}

#[test]
fn an_encoded_upload_that_does_not_decode_is_refused_and_nothing_is_replaced() {
    let wire = Wire::start();
    let (node, payload) = (&wire.fleet.nodes[0], &wire.payload);
    let first = wire.prepare();
    assert!(operation_lines(&first).iter().all(|o| o.ends_with(": applied")));

    // The node's kubelet changed; beside the upload that replaces it lies
    // a truncated encoding of the right content (what an interrupted
    // upload leaves): it is decoded over the upload and must be refused.
    let kubelet = fs::read(payload.files.iter().find(|f| f.rel == "bin/kubelet").unwrap().source.clone()).unwrap();
    fs::write(node.path("payload/bin/kubelet"), "the old kubelet").unwrap();
    let staging = node.path("payload/bin/.winfleet-staging");
    fs::create_dir_all(&staging).unwrap();
    let encoded = gzip(&kubelet);
    fs::write(staging.join("kubelet.winfleet-gz"), &encoded[..encoded.len() / 2]).unwrap();
    // The node's user writes there too (the test runs as another user).
    fs::set_permissions(&staging, fs::Permissions::from_mode(0o777)).unwrap();
    let second = wire.prepare();
    let ops = operation_lines(&second);
    assert_eq!(ops.len(), 1, "{ops:#?}");
    assert!(ops[0].starts_with("~ payload/bin/kubelet (upload bin/kubelet"), "{ops:#?}");
    assert!(ops[0].contains("the upload arrived with SHA-256") && ops[0].contains("failed"), "{ops:#?}");
    assert_eq!(fs::read(node.path("payload/bin/kubelet")).unwrap(), b"the old kubelet", "nothing replaced");
    assert_clean(&node.path("payload"));

    let third = wire.prepare();
    let ops = operation_lines(&third);
    assert!(ops.len() == 1 && ops[0].ends_with(": applied"), "{ops:#?}");
    assert!(fs::read(node.path("payload/bin/kubelet")).unwrap() == kubelet, "the next round puts it right");
}
