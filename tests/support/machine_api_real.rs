//! OpenShift's real Machine API driving the tests' cloud: the MachineSet,
//! Machine (with its drain controller) and nodelink controllers of
//! machine-api-operator, built by tests/machineapi (its own Go module) into
//! target/machineapi/machineapi and run against the real control plane.
//! Their Machine controller's actuator asks this cloud for a Machine's VM
//! over a small JSON API on loopback (tests/machineapi/cloud.go says the
//! contract): `PUT`, `GET`, `DELETE /instances/<namespace>/<machine>`; a
//! refusal a test set with [`Cloud::refuse_creates`] answers 400
//! (permanent: the Machine fails) or 503 (the controller tries again).
//!
//! machine-api-operator's Machine and MachineSet admission webhooks run
//! in the same process, over TLS with a certificate of a test CA this
//! harness generates ([`super::registry::Ca`]), registered with the API
//! server as MAO registers them (tests/machineapi/webhooks.go): every
//! Machine and MachineSet write meets their defaulting and validation.
//!
//! The tests that need it are #[ignore]d like every real-control-plane
//! test; without `go` and without a built binary such a test fails with
//! the reason.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::put;
use axum::{Json, Router};
use serde_json::json;

use super::controlplane::go_build;
use super::machine_provider::{Cloud, Refusal, Vm, Vms};

/// How long the controllers may take to sync their caches.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// Where the binary is built (gitignored: under target/).
pub fn binary() -> PathBuf {
    super::root().join("target/machineapi/machineapi")
}

/// Builds the binary when missing or older than its Go sources
/// ([`go_build`]). `Err` is why it cannot be had.
pub fn ensure_built() -> Result<PathBuf, String> {
    go_build("tests/machineapi", &binary(), "the Machine API controllers (machine-api-operator)", &[])
}

/// The controllers' process; dropped, it is stopped.
pub struct MachineApiProcess {
    child: Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl MachineApiProcess {
    /// Starts the controllers against `kubeconfig`, their actuator asking
    /// `cloud`, and the webhooks; returns once their caches have synced
    /// and the webhooks are registered. Blocking.
    fn start(kubeconfig: &Path, cloud: &str) -> Self {
        let bin = ensure_built().unwrap_or_else(|why| panic!("the Machine API controllers cannot be had here: {why}"));
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("machineapi.log");
        let tls = dir.path().join("webhook-tls");
        std::fs::create_dir(&tls).unwrap();
        super::registry::Ca::new(&tls);
        let webhook_port = super::port::free_port().to_string();
        let mut command = Command::new(&bin);
        command
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--cloud", cloud])
            .args(["--webhook-port", &webhook_port])
            .arg("--webhook-cert-dir")
            .arg(&tls)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap());
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut child = command.spawn().unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let process = MachineApiProcess { child, log, _dir: dir };
        match rx.recv_timeout(READY_TIMEOUT) {
            Ok(line) if line == "ready" => process,
            other => panic!("the Machine API controllers did not get ready: {other:?}\n{}", process.log()),
        }
    }

    /// The controllers' log (klog).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for MachineApiProcess {
    fn drop(&mut self) {
        if std::thread::panicking() || std::env::var_os("WINFLEET_TEST_MACHINEAPI_LOG").is_some() {
            eprintln!("--- the Machine API controllers' log\n{}", self.log());
        }
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-TERM", "--", &group]).stderr(Stdio::null()).status();
        for _ in 0..50 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Cloud {
    /// A pool of `vms` VMs and `hosts` BYOH hosts ([`Cloud::pool`]),
    /// driven by machine-api-operator's controllers running against the
    /// control plane of `kubeconfig`.
    pub async fn start_real(kubeconfig: &Path, vms: usize, hosts: usize) -> Self {
        let mut cloud = Cloud::pool(vms, hosts);
        let url = serve(cloud.vms.clone(), cloud.stop.clone()).await;
        let kubeconfig = kubeconfig.to_owned();
        let process = tokio::task::spawn_blocking(move || MachineApiProcess::start(&kubeconfig, &url)).await.unwrap();
        cloud.controllers = Some(process);
        cloud
    }
}

/// Serves the cloud's API on a loopback port until `stop`; its base URL.
async fn serve(vms: Vms, stop: tokio_util::sync::CancellationToken) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = Router::new().route("/instances/{namespace}/{name}", put(create).get(get).delete(delete)).with_state(vms);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).with_graceful_shutdown(stop.cancelled_owned()).await;
    });
    url
}

#[derive(serde::Deserialize)]
struct CreateRequest {
    #[serde(rename = "userData", default)]
    user_data: String,
}

fn instance(vm: &Vm) -> Response {
    Json(json!({ "id": vm.hostname, "state": "running", "address": vm.address, "hostname": vm.hostname }))
        .into_response()
}

async fn create(
    State(vms): State<Vms>,
    UrlPath((_, name)): UrlPath<(String, String)>,
    Json(request): Json<CreateRequest>,
) -> Response {
    match vms.create(&name, Some(&request.user_data)) {
        Ok(vm) => instance(&vm),
        Err(Refusal::Permanent(error)) => (StatusCode::BAD_REQUEST, Json(json!({ "error": error }))).into_response(),
        Err(Refusal::Transient(error)) => {
            (StatusCode::SERVICE_UNAVAILABLE, Json(json!({ "error": error }))).into_response()
        }
    }
}

async fn get(State(vms): State<Vms>, UrlPath((_, name)): UrlPath<(String, String)>) -> Response {
    match vms.get(&name) {
        Some(vm) => instance(&vm),
        None => (StatusCode::NOT_FOUND, Json(json!({ "error": format!("no instance for {name}") }))).into_response(),
    }
}

async fn delete(State(vms): State<Vms>, UrlPath((_, name)): UrlPath<(String, String)>) -> Response {
    let pool = vms.clone();
    let gone = name.clone();
    let deleted = tokio::task::spawn_blocking(move || pool.delete(&gone)).await.unwrap_or(None);
    if deleted.is_some() {
        vms.deleted(&name);
    }
    Json(json!({})).into_response()
}
