//! What the machines bench sees from outside winfleet: a watch on
//! Machines, CSRs and Nodes, and an SSH banner probe of each VM once its
//! Machine has an address; when each Machine first reached each milestone.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::Node;
use kube::api::DynamicObject;
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use serde_json::Value;
use tokio::io::AsyncReadExt;
use winfleet::lifecycle::VERSION_ANNOTATION;

use super::support::controlplane::resource;
use super::support::machine_bench::MAPI;

const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";

/// When each Machine first reached each milestone.
#[derive(Default)]
pub struct Seen {
    pub created: BTreeMap<String, Instant>,
    pub provisioned: BTreeMap<String, Instant>,
    /// VM address → its sshd sent its banner.
    pub answering: BTreeMap<String, Instant>,
    /// VM address → its node round was done.
    pub configured: BTreeMap<String, Instant>,
    /// Client CSR → issued.
    pub issued: BTreeMap<String, Instant>,
    /// Node → Ready at `version`, uncordoned.
    pub ready: BTreeMap<String, Instant>,
    pub version: String,
    /// The port the probe reaches a VM at (its sshd's, or the relay's).
    pub port: u16,
}

pub type Shared = Arc<Mutex<Seen>>;

pub fn machine_api() -> kube::api::ApiResource {
    resource("machine.openshift.io", "v1beta1", "Machine", "machines")
}

fn note_machine(seen: &Shared, machine: &DynamicObject) {
    let now = Instant::now();
    let name = machine.name_any();
    let mut s = seen.lock().unwrap();
    s.created.entry(name.clone()).or_insert(now);
    let phase = machine.data.pointer("/status/phase").and_then(Value::as_str);
    let addresses = machine.data.pointer("/status/addresses").and_then(Value::as_array);
    let ip = addresses.into_iter().flatten().find(|a| a["type"] == "InternalIP").and_then(|a| a["address"].as_str());
    if let (Some("Provisioned" | "Running"), Some(ip)) = (phase, ip)
        && !s.provisioned.contains_key(&name)
    {
        s.provisioned.insert(name, now);
        tokio::spawn(probe(Arc::clone(seen), ip.to_owned(), s.port));
    }
}

/// Waits until the sshd at `ip` sends its banner.
async fn probe(seen: Shared, ip: String, port: u16) {
    loop {
        let answer = tokio::time::timeout(Duration::from_secs(2), async {
            let mut stream = tokio::net::TcpStream::connect((ip.as_str(), port)).await.ok()?;
            let mut banner = [0u8; 4];
            stream.read_exact(&mut banner).await.ok()?;
            (&banner == b"SSH-").then_some(())
        });
        if let Ok(Some(())) = answer.await {
            seen.lock().unwrap().answering.entry(ip).or_insert_with(Instant::now);
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn note_csr(seen: &Shared, csr: &CertificateSigningRequest) {
    let issued = csr.status.as_ref().is_some_and(|s| s.certificate.is_some());
    if csr.spec.signer_name == CLIENT_SIGNER && issued {
        seen.lock().unwrap().issued.entry(csr.name_any()).or_insert_with(Instant::now);
    }
}

fn note_node(seen: &Shared, node: &Node) {
    let mut s = seen.lock().unwrap();
    let annotations = node.metadata.annotations.clone().unwrap_or_default();
    let at_version = annotations.get(VERSION_ANNOTATION) == Some(&s.version);
    let schedulable = node.spec.as_ref().and_then(|s| s.unschedulable) != Some(true);
    let conditions = node.status.as_ref().and_then(|s| s.conditions.as_ref());
    let ready = conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    if at_version && schedulable && ready {
        s.ready.entry(node.name_any()).or_insert_with(Instant::now);
    }
}

/// Watches Machines, CSRs and Nodes until aborted.
pub fn watch(client: kube::Client, seen: Shared) -> tokio::task::JoinHandle<()> {
    type Step = futures::future::Ready<()>;
    fn each<K>(seen: &Shared, note: fn(&Shared, &K)) -> impl FnMut(Result<watcher::Event<K>, watcher::Error>) -> Step {
        let seen = Arc::clone(seen);
        move |event| {
            if let Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) = event {
                note(&seen, &o);
            }
            futures::future::ready(())
        }
    }
    tokio::spawn(async move {
        let machines = Api::<DynamicObject>::namespaced_with(client.clone(), MAPI, &machine_api());
        let machines = watcher(machines, Default::default()).for_each(each(&seen, note_machine));
        let csrs = watcher(Api::<CertificateSigningRequest>::all(client.clone()), Default::default())
            .for_each(each(&seen, note_csr));
        let nodes = watcher(Api::<Node>::all(client), Default::default()).for_each(each(&seen, note_node));
        futures::join!(machines, csrs, nodes);
    })
}
