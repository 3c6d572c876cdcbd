//! The node lifecycle: what a listed instance needs to become a Windows
//! worker (the payload files, the cluster material, the services of the
//! manifest), as a part of its [`NodeSpec`](crate::node::NodeSpec), and the
//! pure plan from what the node was observed to have.
//!
//! - [`LifecycleSpec`]: the desired part, shared by every node of a dialect.
//!   Offline it holds the version, the directories and the services; the
//!   payload files join at run time from `--payload-dir`
//!   ([`LifecycleSpec::with_payload`]) and the generated files from the
//!   cluster ([`material`]).
//! - [`facts`]: what the observation script reports about them.
//! - [`resolve`]: service commands with their variables, and the service
//!   definition a node should have (a systemd unit, a Windows service).
//! - [`plan`]: the pure lifecycle plan of one node.
//! - [`record`]: winfleet's install record on the node.
//! - [`leftover`]: what a crash left of winfleet's own, and its removal.
//!
//! Which part of the lifecycle a round may touch depends on the node's
//! [`Mode`], decided from the cluster (the Node and its version annotation).

pub mod change;
pub mod containers;
pub mod credential_provider;
pub mod exporter_tls;
pub mod facts;
pub mod go_yaml;
pub mod ignition;
pub mod leftover;
pub mod manifest;
pub mod material;
pub mod named_paths;
pub mod network;
pub mod node_manager;
pub mod node_name;
pub mod plan;
pub mod platform_files;
pub mod provided;
pub mod record;
mod removal;
pub mod resolve;
pub mod service;
pub mod trusted_ca;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use crate::lifecycle::manifest::{ManifestAt, ServicesManifest};
use crate::payload::Payload;
use crate::payload::layout::{WINDOWS_K_DIR, WINDOWS_TEMP_DIR, parents, payload_node_path};
use crate::vocab::Shell;
use crate::vocab::file::{ManagedFile, node_path};
use crate::vocab::platform::Platform;
use manifest::ServiceDef;
use material::ClusterMaterial;

/// WMCO's annotation of the version that fully configured a node
/// (WMCO-SPEC 4.1); winfleet writes its own desired version there.
pub const VERSION_ANNOTATION: &str = "windowsmachineconfig.openshift.io/version";
/// The prefix of every version winfleet writes.
pub const VERSION_PREFIX: &str = "winfleet-";
/// The description of every service (WMCO's, so WMCO's cleanup and
/// winfleet's deconfigure recognise each other's services).
pub const DESCRIPTION_PREFIX: &str = "OpenShift managed";

/// The directories WMCO creates on Windows nodes besides the payload's
/// own (`RequiredDirectories` in `pkg/windows/windows.go`, without WICD's):
/// the services write their logs there and the kubelet reads its static
/// pod manifests there.
const WINDOWS_DIRECTORIES: [&str; 12] = [
    r"C:\k\cni\config",
    r"C:\var\log\kubelet",
    r"C:\var\log\csi-proxy",
    r"C:\var\log\kube-proxy",
    r"C:\var\log\hybrid-overlay",
    r"C:\var\log\containerd",
    r"C:\var\log\windows_exporter",
    r"C:\k\containerd\registries",
    r"C:\k\etc\kubernetes\manifests",
    r"C:\k\tls",
    WINDOWS_TEMP_DIR,
    WINDOWS_K_DIR,
];

/// The lifecycle part of a dialect's node spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LifecycleSpec {
    /// The dialect.
    pub shell: Shell,
    /// The desired version ([`version`]).
    pub version: String,
    /// The payload digest the repository pins.
    pub payload_digest: String,
    /// The services ConfigMap in force (for messages).
    pub manifest: String,
    /// Where its `data.services` is written (findings about the files its
    /// services name point there: [`named_paths`]).
    pub manifest_at: ManifestAt,
    /// Where generated files live: `C:\k`, or the Fleet's payload
    /// directory on posix nodes (relative = from the SSH user's home).
    pub kube_dir: String,
    /// posix: the systemd unit directory.
    pub units_dir: Option<String>,
    /// The registries directory, created here when the lifecycle creates
    /// directories (so the install record holds it).
    pub registries_dir: Option<String>,
    /// Payload files (empty until [`Self::with_payload`]).
    pub files: Vec<NodeFile>,
    /// Files rendered from the cluster (empty until the cluster is read).
    pub generated: Vec<GeneratedFile>,
    /// Directories to create, outermost first.
    pub directories: Vec<String>,
    /// The services, in priority order.
    pub services: Vec<ServiceDef>,
    /// Why this round cannot touch the lifecycle (no or another payload,
    /// unreadable cluster material); `None` when it can.
    pub blocked: Option<String>,
    /// The cluster's platform, from the cluster material ([`Platform::None`]
    /// without a cluster): which Windows builds a host may run.
    pub platform: Platform,
}

/// A payload file at its node path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeFile {
    /// Path on the node.
    pub path: String,
    /// Path in the payload.
    pub rel: String,
    /// Lower-case hex SHA-256.
    pub sha256: String,
    /// Size in bytes.
    pub size: u64,
    /// posix permission bits.
    pub mode: u32,
    /// The local file to upload.
    pub source: PathBuf,
}

/// A file rendered from cluster material (secret: shown as a hash prefix).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedFile {
    /// Path on the node.
    pub path: String,
    /// Content.
    pub file: ManagedFile,
    /// The file that names this one when no command does (the exporter's
    /// certificate is named only in its web config): a change restarts the
    /// services whose command names that file.
    pub named_in: Option<String>,
}

impl GeneratedFile {
    /// A file some service's command names itself (or none does).
    pub fn new(path: String, file: ManagedFile) -> Self {
        Self { path, file, named_in: None }
    }
}

/// The desired version: the payload digest and the services manifest,
/// `winfleet-<12 hex of the payload>-<12 hex of the manifest>`, so the
/// version annotation says which of the two a node has.
pub fn version(payload_digest: &str, manifest_digest: &str) -> String {
    let short =
        |d: &str| d.trim_start_matches(crate::payload::manifest::DIGEST_PREFIX).chars().take(12).collect::<String>();
    format!("{VERSION_PREFIX}{}-{}", short(payload_digest), short(manifest_digest))
}

/// Where the lifecycle's files go, per dialect.
#[derive(Clone, Copy, Debug)]
pub struct LifecycleDirs<'a> {
    /// posix: the Fleet's payload directory.
    pub posix_payload: &'a str,
    /// posix: the Fleet's systemd unit directory.
    pub posix_units: &'a str,
    /// The registries directory (created on Windows as WMCO does).
    pub registries: &'a str,
}

impl LifecycleSpec {
    /// The offline spec: no payload files, no generated files yet.
    pub fn new(shell: Shell, payload_digest: &str, manifest: &ServicesManifest, dirs: LifecycleDirs<'_>) -> Self {
        let (kube_dir, units_dir) = match shell {
            Shell::Powershell => (WINDOWS_K_DIR.to_owned(), None),
            Shell::Posix => (dirs.posix_payload.to_owned(), Some(dirs.posix_units.to_owned())),
        };
        let mut spec = LifecycleSpec {
            shell,
            version: version(payload_digest, &manifest.digest),
            payload_digest: payload_digest.to_owned(),
            manifest: manifest.name.clone(),
            manifest_at: manifest.services_at.clone(),
            kube_dir,
            units_dir,
            registries_dir: Some(dirs.registries.to_owned()).filter(|d| !d.is_empty()),
            files: Vec::new(),
            generated: Vec::new(),
            directories: Vec::new(),
            services: manifest.services.clone(),
            blocked: None,
            platform: Platform::None,
        };
        spec.directories = spec.compute_directories();
        spec
    }

    /// This spec as a round runs it: the payload's files when `payload` is
    /// the pinned one, the files rendered from cluster `material` (none in
    /// SSH-only mode), or blocked with the reason.
    pub fn at_runtime(
        &self,
        payload: &PayloadState,
        material: Option<&Result<ClusterMaterial, String>>,
    ) -> LifecycleSpec {
        let blocked = |reason: String| LifecycleSpec { blocked: Some(reason), ..self.clone() };
        let payload = match payload {
            PayloadState::Missing => {
                return blocked(format!(
                    "no payload directory (--payload-dir) was given; the repository pins {}",
                    self.payload_digest
                ));
            }
            PayloadState::Failed(e) => return blocked(e.clone()),
            PayloadState::Loaded(payload) => payload,
        };
        if let Err(e) = payload.check_pin(&self.payload_digest) {
            return blocked(e.to_string());
        }
        let spec = self.with_payload(payload);
        let spec = match material {
            None => spec,
            Some(Ok(m)) => {
                let spec = LifecycleSpec { platform: m.platform, ..spec };
                network::with_network(&spec, m.network.as_ref().ok(), material::render(&spec, m))
            }
            Some(Err(e)) => return blocked(format!("cannot read the cluster material a node needs to join: {e}")),
        };
        // Without a cluster the platform is not known: a file only some
        // platforms get is taken as provided. Blocked, the spec keeps its
        // files: a deconfigure still knows what the payload put there.
        let platform = material.map(|_| spec.platform);
        match named_paths::unprovided(&spec, platform).as_slice() {
            [] => spec,
            findings => LifecycleSpec { blocked: Some(named_paths::reason(findings)), ..spec },
        }
    }

    /// This spec with the payload's files at their node paths.
    pub fn with_payload(&self, payload: &Payload) -> LifecycleSpec {
        let mut spec = self.clone();
        spec.files = payload
            .files
            .iter()
            .map(|f| NodeFile {
                path: payload_node_path(self.shell, &f.rel, &self.kube_dir),
                rel: f.rel.clone(),
                sha256: f.sha256.clone(),
                size: f.size,
                mode: f.mode,
                source: f.source.clone(),
            })
            .collect();
        spec.directories = spec.compute_directories();
        spec
    }

    /// This spec with the files rendered from cluster material; a payload
    /// file at a generated file's path gives way to it (one writer a path).
    pub fn with_generated(&self, generated: Vec<GeneratedFile>) -> LifecycleSpec {
        let mut spec = self.clone();
        let taken: BTreeSet<String> = generated.iter().map(|g| leftover::fold(self.shell, &g.path)).collect();
        spec.files.retain(|f| !taken.contains(&leftover::fold(self.shell, &f.path)));
        spec.generated = generated;
        spec.directories = spec.compute_directories();
        spec
    }

    /// A node path under the kube directory.
    pub fn kube_path(&self, name: &str) -> String {
        node_path(self.shell, &self.kube_dir, &[name])
    }

    /// Every directory the files, units and (on Windows) WMCO's layout
    /// need, parents before children, without duplicates (case-insensitive
    /// on Windows).
    fn compute_directories(&self) -> Vec<String> {
        let mut wanted: Vec<String> = Vec::new();
        let mut add_with_parents = |path: &str, include_self: bool| {
            for dir in parents(self.shell, path) {
                wanted.push(dir);
            }
            if include_self {
                wanted.push(path.trim_end_matches(['/', '\\']).to_owned());
            }
        };
        add_with_parents(&self.kube_dir, true);
        if let Some(units) = &self.units_dir {
            add_with_parents(units, true);
        }
        if let Some(registries) = &self.registries_dir {
            add_with_parents(registries, true);
        }
        if self.shell == Shell::Powershell {
            for dir in WINDOWS_DIRECTORIES {
                add_with_parents(dir, true);
            }
        }
        for path in self.files.iter().map(|f| &f.path).chain(self.generated.iter().map(|g| &g.path)) {
            add_with_parents(path, false);
        }
        let key = |d: &str| leftover::fold(self.shell, d);
        let mut seen = BTreeSet::new();
        let mut out: Vec<String> = wanted.into_iter().filter(|d| !d.is_empty() && seen.insert(key(d))).collect();
        // Parents before children: fewer separators first, stable otherwise.
        out.sort_by_key(|d| d.matches(['/', '\\']).count());
        out
    }

    /// The spec a leaving node is deconfigured with: never blocked (removal
    /// needs no payload and no cluster material). Its files, directories
    /// and services are observed, not installed: they say what to remove
    /// from a host WMCO configured, which has no install record.
    pub fn for_deconfigure(&self) -> LifecycleSpec {
        LifecycleSpec { blocked: None, ..self.clone() }
    }

    /// The services in scope for a node in `mode` with or without its Node.
    pub fn services_in_scope(&self, mode: Mode, has_node: bool) -> Vec<&ServiceDef> {
        self.services
            .iter()
            .filter(|s| match mode {
                Mode::Prepare => !s.needs_node(),
                Mode::Join => s.bootstrap || has_node,
                Mode::Maintain | Mode::Upgrade => true,
                Mode::UpgradePending | Mode::Deconfigure => false,
            })
            .collect()
    }
}

/// The payload a round runs with.
#[derive(Clone, Debug, Default)]
pub enum PayloadState {
    /// No `--payload-dir` was given.
    #[default]
    Missing,
    /// Read.
    Loaded(Arc<Payload>),
    /// The directory could not be read.
    Failed(String),
}

/// What a round may do with a node's lifecycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Mode {
    /// No cluster (SSH-only): payload files and service definitions only;
    /// nothing is started and no generated file is written.
    Prepare,
    /// Configure: no Node yet, or a Node without winfleet's version (a
    /// fresh host, or one WMCO configured).
    Join,
    /// The Node carries the desired version: drift is repaired.
    Maintain,
    /// The Node carries an older winfleet version: the lifecycle is left
    /// for the upgrade rollout.
    UpgradePending,
    /// The upgrade rollout's step on a cordoned, drained node: everything
    /// that differs changes, and what an older version installed and this
    /// one does not (services, files, by the install record) goes.
    Upgrade,
    /// The instance left the repository: exactly what the install record
    /// holds is removed (services, files, the kubelet's credentials,
    /// directories winfleet created when empty), then the record itself.
    Deconfigure,
}

/// The mode of a node from its Node's version annotation (`None` when no
/// Node is associated) and whether a cluster is configured.
pub fn mode(spec: &LifecycleSpec, cluster: bool, node_version: Option<Option<&str>>) -> Mode {
    match (cluster, node_version) {
        (false, _) => Mode::Prepare,
        (true, None | Some(None)) => Mode::Join,
        (true, Some(Some(v))) if v == spec.version => Mode::Maintain,
        (true, Some(Some(v))) if v.starts_with(VERSION_PREFIX) => Mode::UpgradePending,
        (true, Some(Some(_))) => Mode::Join,
    }
}

/// A shared lifecycle spec.
pub type SharedLifecycle = Arc<LifecycleSpec>;

#[cfg(test)]
pub(crate) mod tests_support;
