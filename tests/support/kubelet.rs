//! A fake kubelet for the node lifecycle tests: a separate process on a
//! test node (started by the systemctl shim from the unit winfleet wrote)
//! that does what a real kubelet does to join, against the in-memory API
//! server over loopback HTTP or a real kube-apiserver over TLS
//! (tests/support/controlplane.rs).
//!
//! It is built into the test binary itself: the payload's kubelet is a
//! script ([`wrapper_script`]) that runs the test binary's ignored entry
//! point `fake_kubelet_process` with the kubelet's own arguments in
//! `WINFLEET_FAKE_KUBELET_ARGS`. Without that variable the entry point
//! returns at once, so `cargo test -- --ignored` does not hang.
//!
//! Like a kubelet with TLS bootstrap and `serverTLSBootstrap: true`:
//! 1. With a client certificate already in `--kubeconfig`, use it (a
//!    restarted kubelet does not bootstrap again). Otherwise read
//!    `--bootstrap-kubeconfig`, submit a client CSR (CN
//!    `system:node:<name>`, O `system:nodes`, signer
//!    `kubernetes.io/kube-apiserver-client-kubelet`) with the bootstrap
//!    token, wait until it is issued (exit 1 when denied or failed), write
//!    `--kubeconfig` with the certificate and its key.
//! 2. As the node, register the Node: name from `--hostname-override` or
//!    the kernel host name, lower-cased; `kubernetes.io/os=windows` and the
//!    `--node-labels`; the `registerWithTaints` of `--config`; addresses
//!    InternalIP `--node-ip` and Hostname. Over TLS (the real server) the
//!    node is the client certificate, which the Node authorizer and
//!    NodeRestriction judge; over plain HTTP (the in-memory API, which has
//!    no TLS) it is `Impersonate-User: system:node:<name>`, its stand-in.
//! 3. Submit a serving CSR (DNS name and IP), without waiting for it.
//! 4. Heartbeat every second (`WINFLEET_FAKE_KUBELET_HEARTBEAT_MS`) until
//!    killed: the node Lease `kube-node-lease/<name>` (created, then
//!    renewed) and the status, Ready with a fresh `lastHeartbeatTime` and
//!    the boot ID of `/proc/sys/kernel/random/boot_id`.
//! 5. Meanwhile run the pods bound to the node: report them Running and
//!    Ready, and confirm the deletion of those the API server marked for
//!    deletion (an eviction), as [`pods`] says.

#![allow(dead_code, clippy::print_stdout)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use rcgen::{CertificateParams, DnType, KeyPair, SanType};
use serde_json::{Value, json};

/// The pods a kubelet runs (tests/support/pods.rs, kept beside this file).
#[path = "pods.rs"]
pub mod pods;

/// The environment variable that carries the kubelet's arguments.
pub const ARGS_VAR: &str = "WINFLEET_FAKE_KUBELET_ARGS";

/// The payload's kubelet "binary": runs this test binary's entry point.
pub fn wrapper_script() -> String {
    let exe = std::env::current_exe().expect("the test binary's path");
    format!(
        "#!/bin/sh\n# The fake kubelet (tests/support/kubelet.rs): this test binary's entry point.\n\
         args=$(for a in \"$@\"; do printf '%s\\0' \"$a\"; done | base64 -w0)\n\
         {ARGS_VAR}=$args exec '{}' --exact fake_kubelet_process --ignored --nocapture --test-threads=1\n",
        exe.display()
    )
}

/// The entry point's body: runs the kubelet when started by the wrapper.
pub fn main_from_env() {
    let Ok(encoded) = std::env::var(ARGS_VAR) else { return };
    let bytes = STANDARD.decode(encoded.trim()).unwrap_or_default();
    let args: Vec<String> =
        String::from_utf8_lossy(&bytes).split('\0').filter(|a| !a.is_empty()).map(str::to_owned).collect();
    let flags = Flags::parse(&args);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    if let Err(e) = runtime.block_on(run(flags)) {
        println!("fake kubelet: {e}");
        std::process::exit(1);
    }
}

/// The flags the fake kubelet reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Flags {
    pub bootstrap_kubeconfig: Option<PathBuf>,
    pub kubeconfig: Option<PathBuf>,
    pub config: Option<PathBuf>,
    pub node_ip: Option<String>,
    pub node_labels: BTreeMap<String, String>,
    pub hostname_override: Option<String>,
}

impl Flags {
    /// Reads `--name=value` and `--name value` forms; unknown flags are ignored.
    pub fn parse(args: &[String]) -> Self {
        let mut flags = Flags::default();
        let mut i = 0;
        while i < args.len() {
            let arg = args[i].trim_start_matches('-');
            let (name, value) = match arg.split_once('=') {
                Some((n, v)) => (n.to_owned(), Some(v.to_owned())),
                None => (arg.to_owned(), args.get(i + 1).filter(|v| !v.starts_with('-')).cloned()),
            };
            if !args[i].contains('=') && value.is_some() {
                i += 1;
            }
            match (name.as_str(), value) {
                ("bootstrap-kubeconfig", Some(v)) => flags.bootstrap_kubeconfig = Some(v.into()),
                ("kubeconfig", Some(v)) => flags.kubeconfig = Some(v.into()),
                ("config", Some(v)) => flags.config = Some(v.into()),
                ("node-ip", Some(v)) => flags.node_ip = Some(v),
                ("hostname-override", Some(v)) => flags.hostname_override = Some(v),
                ("node-labels", Some(v)) => {
                    for pair in v.split(',').filter(|p| !p.is_empty()) {
                        let (k, val) = pair.split_once('=').unwrap_or((pair, ""));
                        flags.node_labels.insert(k.to_owned(), val.to_owned());
                    }
                }
                _ => {}
            }
            i += 1;
        }
        flags
    }
}

/// The PEM request and key of a kubelet certificate.
pub fn certificate_request(node: &str, sans: &[String]) -> (String, KeyPair) {
    let key = KeyPair::generate().expect("a key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.distinguished_name.push(DnType::CommonName, format!("system:node:{node}"));
    params.distinguished_name.push(DnType::OrganizationName, "system:nodes");
    params.subject_alt_names = sans
        .iter()
        .filter_map(|s| match s.parse() {
            Ok(ip) => Some(SanType::IpAddress(ip)),
            Err(_) => s.clone().try_into().ok().map(SanType::DnsName),
        })
        .collect();
    let pem = params.serialize_request(&key).expect("a request").pem().expect("PEM");
    (pem, key)
}

fn csr_object(pem: &str, signer: &str, usages: &[&str]) -> CertificateSigningRequest {
    serde_json::from_value(json!({
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": { "generateName": "node-csr-" },
        "spec": { "request": STANDARD.encode(pem), "signerName": signer, "usages": usages },
    }))
    .expect("a CSR")
}

/// A client from a kubeconfig. `node` is who the client certificate is;
/// over plain HTTP (the in-memory API) no certificate can be presented, so
/// the node is impersonated instead.
async fn client(path: &Path, node: Option<&str>) -> Result<kube::Client, String> {
    let kubeconfig = Kubeconfig::read_from(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let plain_http = config.cluster_url.scheme_str() == Some("http");
    if let Some(node) = node.filter(|_| plain_http) {
        config.auth_info.impersonate = Some(format!("system:node:{node}"));
        config.auth_info.impersonate_groups = Some(vec!["system:nodes".into()]);
    }
    kube::Client::try_from(config).map_err(|e| e.to_string())
}

fn has_certificate(path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|t| t.contains("client-certificate-data"))
}

async fn bootstrap(flags: &Flags, node: &str, kubeconfig: &Path) -> Result<(), String> {
    let bootstrap = flags.bootstrap_kubeconfig.as_deref().ok_or("no --bootstrap-kubeconfig and no certificate")?;
    let client = client(bootstrap, None).await?;
    let (pem, key) = certificate_request(node, &[]);
    let api: Api<CertificateSigningRequest> = Api::all(client);
    let created = api
        .create(
            &PostParams::default(),
            &csr_object(&pem, "kubernetes.io/kube-apiserver-client-kubelet", &["digital signature", "client auth"]),
        )
        .await
        .map_err(|e| format!("creating the client CSR: {e}"))?;
    let name = created.metadata.name.unwrap_or_default();
    println!("fake kubelet: client CSR {name} submitted for node {node}");
    let certificate = loop {
        let csr = api.get(&name).await.map_err(|e| format!("reading CSR {name}: {e}"))?;
        let status = csr.status.unwrap_or_default();
        if let Some(cert) = status.certificate {
            break cert.0;
        }
        if let Some(c) =
            status.conditions.unwrap_or_default().iter().find(|c| c.type_ == "Denied" || c.type_ == "Failed")
        {
            return Err(format!("client CSR {name} {}: {}", c.type_, c.message.clone().unwrap_or_default()));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    println!("fake kubelet: client certificate issued");
    let source: Value = serde_json::from_str(&std::fs::read_to_string(bootstrap).map_err(|e| e.to_string())?)
        .or_else(|_| serde_saphyr::from_str(&std::fs::read_to_string(bootstrap).unwrap_or_default()))
        .map_err(|e| format!("bootstrap kubeconfig: {e}"))?;
    let cluster = source.pointer("/clusters/0/cluster").cloned().unwrap_or_default();
    let written = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "default-cluster", "cluster": cluster }],
        "users": [{ "name": "default-auth", "user": {
            "client-certificate-data": STANDARD.encode(&certificate),
            "client-key-data": STANDARD.encode(key.serialize_pem()),
        }}],
        "contexts": [{ "name": "default-context", "context": { "cluster": "default-cluster", "user": "default-auth" } }],
        "current-context": "default-context",
    });
    std::fs::write(kubeconfig, written.to_string()).map_err(|e| format!("{}: {e}", kubeconfig.display()))
}

fn taints(config: Option<&Path>) -> Value {
    let conf: Value = config
        .and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    conf.get("registerWithTaints").cloned().unwrap_or_else(|| json!([]))
}

/// The boot the kubelet runs in, as a real kubelet reports it.
fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default().trim().to_owned()
}

fn ready_status(node_ip: &str, node: &str) -> Value {
    let now = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    json!({ "status": {
        "addresses": [{ "type": "InternalIP", "address": node_ip }, { "type": "Hostname", "address": node }],
        "conditions": [{
            "type": "Ready", "status": "True", "reason": "KubeletReady", "message": "fake kubelet is posting ready status",
            "lastHeartbeatTime": now, "lastTransitionTime": now,
        }],
        "nodeInfo": { "kubeletVersion": "v1.33.2", "operatingSystem": "windows", "architecture": "amd64",
            "machineID": node, "systemUUID": "", "bootID": boot_id(), "kernelVersion": "10.0.20348", "osImage": "fake",
            "containerRuntimeVersion": "containerd://1.7.0", "kubeProxyVersion": "v1.33.2" },
    }})
}

async fn run(flags: Flags) -> Result<(), String> {
    let hostname = match &flags.hostname_override {
        Some(h) => h.clone(),
        None => std::fs::read_to_string("/proc/sys/kernel/hostname").map_err(|e| e.to_string())?.trim().to_owned(),
    };
    let node = hostname.to_lowercase();
    let node_ip = flags.node_ip.clone().ok_or("no --node-ip")?;
    let kubeconfig = flags.kubeconfig.clone().ok_or("no --kubeconfig")?;
    if !has_certificate(&kubeconfig) {
        bootstrap(&flags, &node, &kubeconfig).await?;
    }
    let client = client(&kubeconfig, Some(&node)).await?;
    let nodes: Api<Node> = Api::all(client.clone());
    if nodes.get_opt(&node).await.map_err(|e| format!("reading Node {node}: {e}"))?.is_none() {
        let mut labels =
            json!({ "kubernetes.io/os": "windows", "kubernetes.io/hostname": node, "kubernetes.io/arch": "amd64" });
        for (k, v) in &flags.node_labels {
            labels[k] = json!(v);
        }
        let object: Node = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": { "name": node, "labels": labels },
            "spec": { "taints": taints(flags.config.as_deref()) },
        }))
        .map_err(|e| e.to_string())?;
        nodes.create(&PostParams::default(), &object).await.map_err(|e| format!("registering Node {node}: {e}"))?;
        println!("fake kubelet: registered Node {node} with address {node_ip}");
    }
    let params = PatchParams::default();
    nodes
        .patch_status(&node, &params, &Patch::Merge(ready_status(&node_ip, &node)))
        .await
        .map_err(|e| format!("node status: {e}"))?;
    let (pem, _) = certificate_request(&node, &[node.clone(), node_ip.clone()]);
    let csrs: Api<CertificateSigningRequest> = Api::all(client.clone());
    match csrs
        .create(
            &PostParams::default(),
            &csr_object(&pem, "kubernetes.io/kubelet-serving", &["digital signature", "server auth"]),
        )
        .await
    {
        Ok(c) => println!("fake kubelet: serving CSR {} submitted", c.metadata.name.unwrap_or_default()),
        Err(e) => println!("fake kubelet: serving CSR refused: {e}"),
    }
    tokio::spawn(pods::run(client.clone(), node.clone()));
    let leases: Api<Lease> = Api::namespaced(client, LEASE_NAMESPACE);
    let every = std::env::var("WINFLEET_FAKE_KUBELET_HEARTBEAT_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
    loop {
        if let Err(e) = renew_lease(&leases, &node).await {
            println!("fake kubelet: lease renewal failed: {e}");
        }
        tokio::time::sleep(Duration::from_millis(every)).await;
        if let Err(e) = nodes.patch_status(&node, &params, &Patch::Merge(ready_status(&node_ip, &node))).await {
            println!("fake kubelet: heartbeat failed: {e}");
        }
    }
}

/// Where kubelets keep their node Leases (kube-apiserver creates it).
pub const LEASE_NAMESPACE: &str = "kube-node-lease";

/// Creates or renews the node's Lease, as the kubelet's node lease
/// controller does (holder: the node; 40 s, the kubelet's default).
async fn renew_lease(leases: &Api<Lease>, node: &str) -> Result<(), String> {
    let now = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S.%6fZ").to_string();
    match leases.get_opt(node).await.map_err(|e| format!("reading Lease {node}: {e}"))? {
        Some(mut lease) => {
            let spec = lease.spec.get_or_insert_with(Default::default);
            spec.renew_time = serde_json::from_value(json!(now)).map_err(|e| e.to_string())?;
            leases.replace(node, &PostParams::default(), &lease).await.map(drop).map_err(|e| e.to_string())
        }
        None => {
            let lease: Lease = serde_json::from_value(json!({
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": { "name": node, "namespace": LEASE_NAMESPACE },
                "spec": { "holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": now },
            }))
            .map_err(|e| e.to_string())?;
            leases.create(&PostParams::default(), &lease).await.map(drop).map_err(|e| format!("creating: {e}"))
        }
    }
}
