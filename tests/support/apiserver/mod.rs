//! An in-memory Kubernetes API server for tests, reached through a real
//! `kube::Client` — in process (`ApiServer::client`, a tower Service, so
//! tests can run under tokio's paused clock) or over loopback HTTP with a
//! generated kubeconfig (`ApiServer::serve`, for the winfleet binary).
//!
//! # Served
//! core/v1 `nodes` (cluster), `pods` (+ `status`, `eviction`), `events`,
//! `serviceaccounts` (+ `token`, the TokenRequest API: `token_request.rs`);
//! policy/v1 `poddisruptionbudgets`; events.k8s.io/v1 `events`;
//! machine.openshift.io/v1beta1 `machinesets`, `machines`, `machinehealthchecks`;
//! config.openshift.io/v1 `proxies`, `infrastructures`, `networks`; operator.openshift.io/v1 `networks`
//! (cluster); machineconfiguration.openshift.io/v1 `controllerconfigs`,
//! `machineconfigs`, `machineconfigpools` (cluster); core/v1 `secrets`, `configmaps`; certificates.k8s.io/v1
//! `certificatesigningrequests` (+ `status`, `approval`); coordination.k8s.io/v1
//! `leases`; core/v1 `namespaces` (cluster), `services`, `endpoints` and
//! monitoring.coreos.com/v1 `servicemonitors` (Windows node monitoring);
//! and `/version`. Anything else is a 404 Status. A cluster-scoped
//! type under a namespaced URL is 404; namespaced types list and watch
//! across all namespaces (`/api/v1/pods`) or in one.
//!
//! # Faithful
//! - get/list/create/replace/delete with real `Status` errors (NotFound,
//!   AlreadyExists, Conflict, Invalid, BadRequest, TooManyRequests,
//!   InternalError, Expired) so kube returns `Error::Api` with the right code.
//! - One global resourceVersion; every persisted write bumps it. A PUT or
//!   patch whose resulting object carries a different
//!   `metadata.resourceVersion` than the stored one is 409 Conflict. No-op
//!   updates (nothing changes, managedFields included) are not written: no
//!   new resourceVersion, no watch event, not in history — as etcd3 storage.
//! - uid/creationTimestamp/generation on create; generation bumps when
//!   anything outside metadata and status changes. Server-owned metadata
//!   cannot be changed by writes.
//! - Types with a status subresource (nodes, pods, PDBs, CSRs, and the
//!   custom resources whose CRD declares one): main-resource writes keep
//!   the stored status, `/status` writes change only status. Create keeps
//!   the given status for the built-in types, drops it for a custom
//!   resource (as kube-apiserver does; `seed` writes it through `/status`).
//! - Custom resources are served by the CRDs of the real control plane
//!   (tests/controlplane/crds, `crd.rs`): the status subresource as the
//!   CRD declares it (Network has none: status is written with the object,
//!   and a status change is a new generation), unknown fields pruned and
//!   defaults applied on every write, and an applied field the schema does
//!   not declare refused (500) as the real server does.
//! - Patches: merge (RFC 7386); JSON patch (RFC 6902; a failing operation
//!   is 422 Invalid, as the real server); apply (below). Patching a missing
//!   object is 404, except apply which creates.
//! - Server-side apply: fieldManager required (422 Invalid like the real
//!   PatchOptions validation; kube also refuses client-side); force only on
//!   apply; managedFields per (manager, operation, subresource) in real
//!   FieldsV1; conflicts are 409 with the real message and
//!   `FieldManagerConflict` causes; force moves ownership; fields the
//!   applier omits now are removed unless someone else owns them.
//!   Non-apply writes give the writer (fieldManager, default "unknown") an
//!   Update entry for the fields it changed and take them from the others.
//! - dryRun=All on every write: validation, admission and conflicts run,
//!   the answer is what would be stored, nothing persists (see `dry_runs`).
//! - Label selectors (=, ==, !=, in, notin, exists, !exists, >, <) and field
//!   selectors (metadata.name, metadata.namespace, and per type: pods
//!   spec.nodeName/status.phase/…, nodes spec.unschedulable, core events
//!   involvedObject.*); malformed or unsupported → 400. `limit`/`continue`.
//! - Watch: see `watch.rs` (initial ADDED, resume from a resourceVersion,
//!   410 for too old, selector transitions, timeoutSeconds, streaming-list
//!   bookmarks).
//! - Eviction with PodDisruptionBudgets, and their status as the
//!   disruption controller writes it: see `eviction.rs`.
//! - Identity: impersonation headers, else a bearer token of the token
//!   table (`add_token`; unknown → 401), else anonymous (`identity.rs`).
//! - CertificateSigningRequests: create validation, the requester's
//!   identity in the spec, the approval subresource rules, and the
//!   kube-controller-manager's signer for the two kubelet signers, run on
//!   the approving write (`csr.rs`).
//! - Validation before admission: name (or generateName) required on
//!   create (422), body namespace/name must match the URL (400),
//!   apiVersion/kind must match the resource (400).
//!
//! # Simplified or not implemented
//! - Strategic merge patch is a merge patch: lists are replaced whole (no
//!   merge keys), `$` directives are dropped.
//! - In field ownership, lists are atomic (one leaf), as are scalars; maps
//!   are granular (the real server follows the schema: a map declared
//!   `x-kubernetes-map-type: atomic`, as a MachineSet's `spec.selector`, is
//!   one leaf there).
//! - Deletion is immediate (no graceful termination, finalizers, or
//!   garbage collection of dependents; deleteCollection is 405), except
//!   an evicted pod bound to a node, which waits for its kubelet as on a
//!   real server (`eviction.rs`).
//! - PUT never creates; no defaulting of built-in types, no schema
//!   validation (custom resources are pruned and defaulted only), no RBAC,
//!   `scale` for MachineSets only (`scale.rs`), namespaces stored as plain objects
//!   (no namespace lifecycle: an object may be created in a namespace that
//!   does not exist), Endpoints addresses not validated (the real server
//!   refuses loopback and link-local IPs there), no Table output, no
//!   protobuf. Periodic watch bookmarks are not sent.
//! - Admission is a test hook (`reject`), called under the store lock: it
//!   must not call back into the ApiServer.
//!
//! # Test helpers
//! `set_down` takes the server away and brings it back, `before_request`
//! runs a closure before a request is served (`outage.rs`).
//! `seed` creates objects (manager "seed"; no admission; not in history).
//! `update` / `delete` are out-of-band writes (the kubelet, a user): they
//! bump the resourceVersion, emit watch events and go into history with
//! field manager "test", without admission.

mod builtin;
mod crd;
mod csr;
mod eviction;
pub mod fixtures;
pub mod identity;
mod managed;
mod ops;
mod outage;
mod resources;
mod routes;
mod scale;
mod selectors;
mod status;
mod store;
mod token_request;
mod watch;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Value, json};

use ops::Opts;
use store::State;

/// One persisted (or dry-run) write.
#[derive(Debug, Clone)]
pub struct Write {
    pub at: tokio::time::Instant,
    /// create, update, patch, apply, delete or evict.
    pub verb: String,
    /// Plural, e.g. "nodes".
    pub resource: String,
    pub namespace: Option<String>,
    pub name: String,
    pub subresource: Option<String>,
    pub field_manager: Option<String>,
    /// The object after the write; the deleted/evicted object for delete/evict.
    pub object: Value,
}

/// What an admission hook sees.
#[derive(Debug, Clone)]
pub struct Admission {
    pub verb: String,
    pub resource: String,
    pub namespace: Option<String>,
    pub name: String,
    pub dry_run: bool,
    /// The object as it would be stored (the object being removed, for delete/evict).
    pub object: Value,
}

pub(crate) type Hook = dyn Fn(&Admission) -> Option<String> + Send + Sync;

/// The in-memory API server. Clones share the same state.
#[derive(Clone)]
pub struct ApiServer {
    state: Arc<Mutex<State>>,
    outage: Arc<outage::Outage>,
}

impl Default for ApiServer {
    fn default() -> Self {
        Self::new()
    }
}

/// A loopback listener serving the API; stops when dropped.
pub struct Served {
    /// `http://127.0.0.1:PORT`
    pub url: String,
    /// A kubeconfig file pointing at `url` (context "winfleet-test", namespace "default").
    pub kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.task.abort();
    }
}

fn resource(api_version: &str, kind: &str) -> &'static resources::Resource {
    resources::by_kind(api_version, kind)
        .unwrap_or_else(|| panic!("the test API server does not serve {api_version} {kind}"))
}

fn helper_opts(res: &'static resources::Resource, namespace: Option<&str>, manager: &str, record: bool) -> Opts {
    Opts {
        res,
        namespace: if res.namespaced { namespace.map(str::to_string) } else { None },
        subresource: None,
        dry_run: false,
        manager: Some(manager.to_string()),
        force: false,
        admit: false,
        record,
        allow_status: true,
    }
}

/// A fault the server answers with instead of serving a request: for the
/// next `times` requests whose method and path match, `status` (with
/// `Retry-After` when given).
#[derive(Clone, Debug)]
pub struct Fault {
    pub method: String,
    pub path_contains: String,
    pub status: u16,
    pub retry_after: Option<u64>,
    pub times: usize,
}

impl ApiServer {
    /// Answers the next `times` requests with `method` whose path contains
    /// `path_contains` with `status` (and `Retry-After`).
    pub fn fail(&self, method: &str, path_contains: &str, status: u16, retry_after: Option<u64>, times: usize) {
        self.lock().faults.push(Fault {
            method: method.to_owned(),
            path_contains: path_contains.to_owned(),
            status,
            retry_after,
            times,
        });
    }

    /// Ends every open watch stream (an API server restart, a broken
    /// connection): watchers must reconnect on their own.
    pub fn drop_watches(&self) {
        self.lock().drops.send_modify(|n| *n += 1);
    }

    /// The faults served so far: (method, path, status).
    pub fn faults_served(&self) -> Vec<(String, String, u16)> {
        self.lock().faults_served.clone()
    }

    /// The fault to serve for a request, if any (consumes one).
    pub(crate) fn take_fault(&self, method: &str, path: &str) -> Option<Fault> {
        let mut st = self.lock();
        let i = st.faults.iter().position(|f| f.times > 0 && f.method == method && path.contains(&f.path_contains))?;
        st.faults[i].times -= 1;
        let fault = st.faults[i].clone();
        st.faults_served.push((method.to_owned(), path.to_owned(), fault.status));
        Some(fault)
    }

    pub fn new() -> Self {
        Self { state: Arc::new(Mutex::new(State::new())), outage: Arc::default() }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An in-process client (no IO; works under a paused clock). While
    /// the server is down ([`Self::set_down`]) its requests fail as a
    /// connection to a dead server does.
    pub fn client(&self) -> kube::Client {
        use tower::ServiceExt;
        let (server, router) = (self.clone(), routes::router(self.clone()));
        let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
            let (server, router) = (server.clone(), router.clone());
            async move {
                if server.outage.is_down() {
                    return Err::<_, tower::BoxError>("connection refused: the API server is down".into());
                }
                router.oneshot(req).await.map_err(tower::BoxError::from)
            }
        });
        kube::Client::new(service, "default")
    }

    /// The API as an axum Router (for raw requests with `tower::ServiceExt::oneshot`).
    pub fn router(&self) -> axum::Router {
        routes::router(self.clone())
    }

    /// Serves over loopback HTTP and writes a kubeconfig for it (no auth,
    /// plain http). The server runs on the calling runtime: to run the
    /// winfleet binary against it, use a multi-thread runtime or
    /// `tokio::process`, never a blocking `std::process::Command::output`
    /// on a current-thread runtime. Note that a `kube::Client` built from a
    /// Config retries 429/503/504 by itself (`Config::default_retry`).
    pub async fn serve(&self) -> Served {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binding a loopback port");
        let addr = listener.local_addr().expect("local address");
        let url = format!("http://{addr}");
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let app = routes::router(self.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = rx.await;
                })
                .await;
        });
        let dir = tempfile::tempdir().expect("tempdir for the kubeconfig");
        let kubeconfig = dir.path().join("kubeconfig");
        let config = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{ "name": "winfleet-test", "cluster": { "server": url } }],
            "users": [{ "name": "winfleet-test", "user": {} }],
            "contexts": [{
                "name": "winfleet-test",
                "context": { "cluster": "winfleet-test", "user": "winfleet-test", "namespace": "default" },
            }],
            "current-context": "winfleet-test",
        });
        std::fs::write(&kubeconfig, serde_json::to_string_pretty(&config).expect("kubeconfig json"))
            .expect("writing the kubeconfig");
        Served { url, kubeconfig, _dir: dir, shutdown: Some(tx), task }
    }

    /// Creates an object as a user would (field manager "seed"), then,
    /// when its type has a status subresource that create does not take (a
    /// custom resource's), writes its `status` through `/status` as a
    /// controller would — as `ControlPlane::seed` does on the real server;
    /// returns it as stored.
    pub fn seed(&self, obj: Value) -> Value {
        let api_version = obj["apiVersion"].as_str().unwrap_or_default().to_string();
        let kind = obj["kind"].as_str().unwrap_or_default().to_string();
        let res = resource(&api_version, &kind);
        let ns = obj.pointer("/metadata/namespace").and_then(Value::as_str).map(str::to_string);
        if res.namespaced && ns.is_none() {
            panic!("seed: {kind} is namespaced but the object has no metadata.namespace");
        }
        let mut o = helper_opts(res, ns.as_deref(), "seed", false);
        o.admit = false;
        let status = obj.get("status").cloned();
        let mut st = self.lock();
        let created = ops::create(&mut st, &o, obj).unwrap_or_else(|e| panic!("seed {kind}: {}", e.message));
        let Some(status) = status.filter(|s| res.has_status() && created.get("status") != Some(s)) else {
            return created;
        };
        let name = created.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned();
        let o = Opts { subresource: Some("status".into()), ..o };
        ops::mutate(&mut st, &o, &name, |v| v["status"] = status)
            .unwrap_or_else(|e| panic!("seed {kind} status: {}", e.message))
    }

    pub fn get(&self, api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        let res = resource(api_version, kind);
        let ns = if res.namespaced { namespace } else { None };
        self.lock().get(res, ns, name).cloned()
    }

    /// Every object of a type, all namespaces, sorted by namespace/name.
    pub fn list(&self, api_version: &str, kind: &str) -> Vec<Value> {
        let res = resource(api_version, kind);
        self.lock().iter(res, None).cloned().collect()
    }

    /// An out-of-band change (e.g. the kubelet flips Ready). Panics if the object is missing.
    pub fn update(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
        f: impl FnOnce(&mut Value),
    ) {
        let res = resource(api_version, kind);
        let o = helper_opts(res, namespace, "test", true);
        let mut st = self.lock();
        ops::mutate(&mut st, &o, name, f).unwrap_or_else(|e| panic!("update {kind} {name}: {}", e.message));
    }

    /// An out-of-band delete. Panics if the object is missing.
    pub fn delete(&self, api_version: &str, kind: &str, namespace: Option<&str>, name: &str) {
        let res = resource(api_version, kind);
        let o = helper_opts(res, namespace, "test", true);
        let mut st = self.lock();
        ops::delete(&mut st, &o, name, &json!({})).unwrap_or_else(|e| panic!("delete {kind} {name}: {}", e.message));
    }

    /// Every persisted write through the API, and the test's update/delete, in order.
    pub fn history(&self) -> Vec<Write> {
        self.lock().history.clone()
    }

    /// Every dry-run write that passed.
    pub fn dry_runs(&self) -> Vec<Write> {
        self.lock().dry_runs.clone()
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.lock().rv
    }

    /// Accepts `token` as a bearer token of `user` in `groups` (plus
    /// `system:authenticated`).
    pub fn add_token(&self, token: &str, user: &str, groups: &[&str]) {
        let mut groups: Vec<String> = groups.iter().map(|g| (*g).to_owned()).collect();
        identity::authenticated(&mut groups);
        let who = identity::Identity { user: user.to_owned(), uid: String::new(), groups };
        self.lock().tokens.insert(token.to_owned(), who);
    }

    /// The PEM certificate of the CA the emulated kubelet signers sign with.
    pub fn ca_pem(&self) -> String {
        self.lock().ca().pem()
    }

    /// The API server's version as `/version` reports it (`v1.35.1`;
    /// default `v1.33.2`): its `gitVersion`, `major` and `minor`.
    pub fn set_version(&self, git_version: &str) {
        self.lock().git_version = git_version.to_owned();
    }

    /// An admission webhook stand-in, run for every API write (dry runs
    /// included): `Some(message)` rejects it with 422 Invalid.
    pub fn reject(&self, hook: impl Fn(&Admission) -> Option<String> + Send + Sync + 'static) {
        self.lock().hooks.push(Arc::new(hook));
    }
}
