//! What Windows node monitoring should be, as data: the Service, Endpoints
//! and ServiceMonitor for windows_exporter (port 9182) in winfleet's
//! namespace, and the namespace's cluster-monitoring label, as WMCO's
//! metric controller kept them (WMCO `pkg/metrics` before it moved to the
//! kubelet's EndpointSlices). Pure: the observed objects in, the writes out.

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde_json::{Map, Value, json};

use crate::cluster::MANAGED_BY;

/// The name of the Service, Endpoints and ServiceMonitor (WMCO's
/// `WindowsMetricsResource`).
pub const NAME: &str = "windows-exporter";
/// windows_exporter's port on every Windows node (WMCO's `metrics.Port`).
pub const PORT: i64 = 9182;
/// The port's name in the Service and Endpoints (WMCO's `metrics.PortName`).
pub const PORT_NAME: &str = "metrics";
/// The namespace label that lets the cluster's Prometheus scrape the
/// namespace's ServiceMonitors (the seeds: "required for enabling cluster
/// monitoring").
pub const MONITORING_LABEL: &str = "openshift.io/cluster-monitoring";
/// The serving certificate the service CA issues for the Service (WMCO's
/// Service annotation and Secret name).
pub const SERVING_CERT: (&str, &str) =
    ("service.alpha.openshift.io/serving-cert-secret-name", "windows-machine-config-operator-tls");

/// What the monitoring step read from the cluster.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    /// The namespace's labels; `None` when the namespace does not exist.
    pub namespace_labels: Option<BTreeMap<String, String>>,
    /// The cluster serves `monitoring.coreos.com/v1` ServiceMonitors.
    pub service_monitor_served: bool,
    /// Every Windows Node (`kubernetes.io/os=windows`), whole.
    pub nodes: Vec<Value>,
    /// The Service, Endpoints and ServiceMonitor named [`NAME`], when present.
    pub service: Option<Value>,
    /// See `service`.
    pub endpoints: Option<Value>,
    /// See `service`.
    pub service_monitor: Option<Value>,
}

/// One write of the plan.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    /// Set [`MONITORING_LABEL`] to `"true"` on the namespace (it was absent).
    LabelNamespace,
    /// Server-side apply of this object (created or brought back).
    Apply(Value),
}

impl Write {
    /// How a log line names it.
    pub fn describe(&self, namespace: &str) -> String {
        match self {
            Write::LabelNamespace => format!("label Namespace {namespace} {MONITORING_LABEL}=true"),
            Write::Apply(object) => {
                let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default();
                match kind {
                    "Endpoints" => {
                        let count = addresses(object).len();
                        format!("apply Endpoints {namespace}/{NAME} ({count} Windows node(s))")
                    }
                    _ => format!("apply {kind} {namespace}/{NAME}"),
                }
            }
        }
    }
}

/// The plan: writes, or why monitoring is not kept.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// The cluster does not serve ServiceMonitors: nothing is kept.
    NotServed,
    /// The namespace does not exist.
    NoNamespace,
    /// An administrator set the label to something other than `true`
    /// (WMCO then keeps nothing either); its value.
    Disabled(String),
    /// The writes that bring the objects to what they should be (none when
    /// all are).
    Writes(Vec<Write>),
}

/// The plan for `namespace` from what was observed.
pub fn plan(namespace: &str, observed: &Observed) -> Plan {
    if !observed.service_monitor_served {
        return Plan::NotServed;
    }
    let Some(labels) = &observed.namespace_labels else { return Plan::NoNamespace };
    let mut writes = Vec::new();
    match labels.get(MONITORING_LABEL).map(|v| v.trim().to_ascii_lowercase()) {
        None => writes.push(Write::LabelNamespace),
        Some(value) if value == "true" => {}
        Some(_) => return Plan::Disabled(labels.get(MONITORING_LABEL).cloned().unwrap_or_default()),
    }
    let wanted = [
        (service(namespace), &observed.service),
        (endpoints(namespace, &observed.nodes), &observed.endpoints),
        (service_monitor(namespace), &observed.service_monitor),
    ];
    for (object, present) in wanted {
        if !present.as_ref().is_some_and(|p| covers(&object, p)) {
            writes.push(Write::Apply(object));
        }
    }
    Plan::Writes(writes)
}

fn labels() -> Value {
    json!({"name": NAME, MANAGED_BY.0: MANAGED_BY.1})
}

/// The Service: no selector (its Endpoints are winfleet's), WMCO's port and
/// serving-certificate annotation.
pub fn service(namespace: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": NAME,
            "namespace": namespace,
            "labels": labels(),
            "annotations": {SERVING_CERT.0: SERVING_CERT.1},
        },
        "spec": {"ports": [{"name": PORT_NAME, "port": PORT, "protocol": "TCP", "targetPort": PORT}]},
    })
}

/// The Endpoints: each Windows Node's first InternalIP, sorted, with the
/// Node as target (WMCO's `getNodeEndpointAddresses`); no subset when there
/// is no Windows Node.
pub fn endpoints(namespace: &str, nodes: &[Value]) -> Value {
    let mut addresses: Vec<(String, String)> = nodes.iter().filter_map(internal_ip).collect();
    addresses.sort();
    addresses.dedup();
    let subsets = if addresses.is_empty() {
        json!([])
    } else {
        let addresses: Vec<Value> = addresses
            .into_iter()
            .map(|(ip, node)| json!({"ip": ip, "targetRef": {"kind": "Node", "name": node}}))
            .collect();
        json!([{"addresses": addresses, "ports": [{"name": PORT_NAME, "port": PORT, "protocol": "TCP"}]}])
    };
    json!({
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": NAME, "namespace": namespace, "labels": labels()},
        "subsets": subsets,
    })
}

/// `(InternalIP, Node name)` of a Node with one that Endpoints may hold.
fn internal_ip(node: &Value) -> Option<(String, String)> {
    first_internal_ip(node).filter(|(ip, _)| endpoint_ip(ip))
}

/// The Windows Nodes whose InternalIP Endpoints may not hold (the API
/// server refuses loopback, link-local and unspecified addresses there):
/// `(Node name, address)`. Their windows_exporter is not scraped.
pub fn left_out(nodes: &[Value]) -> Vec<(String, String)> {
    nodes.iter().filter_map(first_internal_ip).filter(|(ip, _)| !endpoint_ip(ip)).map(|(ip, n)| (n, ip)).collect()
}

/// Kubernetes' rule for an Endpoints address (`ValidateEndpointIP`): not
/// unspecified, loopback, link-local or link-local multicast.
fn endpoint_ip(ip: &str) -> bool {
    match ip.parse::<IpAddr>() {
        Ok(IpAddr::V4(v4)) => {
            !(v4.is_unspecified() || v4.is_loopback() || v4.is_link_local() || v4.octets()[..3] == [224, 0, 0])
        }
        Ok(IpAddr::V6(v6)) => {
            let first = v6.segments()[0];
            !(v6.is_unspecified() || v6.is_loopback() || first & 0xffc0 == 0xfe80 || first & 0xff0f == 0xff02)
        }
        Err(_) => false,
    }
}

fn first_internal_ip(node: &Value) -> Option<(String, String)> {
    let name = node.pointer("/metadata/name").and_then(Value::as_str).filter(|n| !n.is_empty())?;
    let ip = node.pointer("/status/addresses").and_then(Value::as_array)?.iter().find_map(|a| {
        let internal = a.get("type").and_then(Value::as_str) == Some("InternalIP");
        a.get("address").and_then(Value::as_str).filter(|ip| internal && !ip.is_empty())
    })?;
    Some((ip.to_owned(), name.to_owned()))
}

/// Every address of every subset of an Endpoints object.
pub(super) fn addresses(endpoints: &Value) -> Vec<&Value> {
    endpoints
        .get("subsets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .flat_map(|s| s.get("addresses").and_then(Value::as_array).into_iter().flatten())
        .collect()
}

/// The ServiceMonitor WMCO created for its Endpoints: HTTPS with the service
/// CA, the node's name as the `instance` label.
pub fn service_monitor(namespace: &str) -> Value {
    json!({
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {"name": NAME, "namespace": namespace, "labels": labels()},
        "spec": {
            "endpoints": [{
                "honorLabels": true,
                "interval": "30s",
                "path": "/metrics",
                "port": PORT_NAME,
                "scheme": "https",
                "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
                "tlsConfig": {
                    "caFile": "/etc/prometheus/configmaps/serving-certs-ca-bundle/service-ca.crt",
                    "serverName": format!("{NAME}.{namespace}.svc"),
                },
                "relabelings": [{
                    "action": "replace",
                    "regex": "(.*)",
                    "replacement": "$1",
                    "targetLabel": "instance",
                    "sourceLabels": ["__meta_kubernetes_endpoint_address_target_name"],
                }],
            }],
            "selector": {"matchLabels": {"name": NAME}},
        },
    })
}

/// Whether `present` has everything `wanted` says: every key of a map (what
/// the server adds, such as a Service's cluster IP, is left alone), lists
/// element by element and of the same length, scalars equal; an absent
/// value stands for an empty list (the API server drops `subsets: []`).
pub fn covers(wanted: &Value, present: &Value) -> bool {
    match (wanted, present) {
        (Value::Object(w), Value::Object(p)) => w.iter().all(|(k, v)| covers(v, p.get(k).unwrap_or(&Value::Null))),
        (Value::Object(w), Value::Null) => w.is_empty() || covers(wanted, &Value::Object(Map::new())),
        (Value::Array(w), Value::Array(p)) => w.len() == p.len() && w.iter().zip(p).all(|(w, p)| covers(w, p)),
        (Value::Array(w), Value::Null) => w.is_empty(),
        (w, p) => w == p,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, addresses: &[(&str, &str)]) -> Value {
        let addresses: Vec<Value> = addresses.iter().map(|(t, a)| json!({"type": t, "address": a})).collect();
        json!({"metadata": {"name": name}, "status": {"addresses": addresses}})
    }

    fn observed(nodes: Vec<Value>) -> Observed {
        Observed {
            namespace_labels: Some(BTreeMap::from([(MONITORING_LABEL.to_owned(), "true".to_owned())])),
            service_monitor_served: true,
            nodes,
            ..Observed::default()
        }
    }

    #[test]
    fn endpoints_hold_each_windows_node_internal_ip_sorted_with_the_node_as_target() {
        let nodes = [
            node("winb", &[("Hostname", "winb"), ("InternalIP", "10.0.0.9")]),
            node("wina", &[("ExternalIP", "1.2.3.4"), ("InternalIP", "10.0.0.10"), ("InternalIP", "10.0.0.11")]),
            node("winc", &[("Hostname", "winc")]),
        ];
        let e = endpoints("winfleet", &nodes);
        assert_eq!(
            e["subsets"],
            json!([{
                "addresses": [
                    {"ip": "10.0.0.10", "targetRef": {"kind": "Node", "name": "wina"}},
                    {"ip": "10.0.0.9", "targetRef": {"kind": "Node", "name": "winb"}},
                ],
                "ports": [{"name": "metrics", "port": 9182, "protocol": "TCP"}],
            }])
        );
        assert_eq!(endpoints("winfleet", &[])["subsets"], json!([]));
    }

    #[test]
    fn addresses_the_api_server_refuses_in_endpoints_are_left_out_and_named() {
        let nodes = [
            node("lo", &[("InternalIP", "127.0.0.5")]),
            node("ll", &[("InternalIP", "169.254.1.1")]),
            node("v6", &[("InternalIP", "fe80::1")]),
            node("ok", &[("InternalIP", "fd00::5")]),
        ];
        let e = endpoints("winfleet", &nodes);
        assert_eq!(
            e["subsets"][0]["addresses"],
            json!([{"ip": "fd00::5", "targetRef": {"kind": "Node", "name": "ok"}}])
        );
        let out: Vec<String> = left_out(&nodes).into_iter().map(|(n, _)| n).collect();
        assert_eq!(out, ["lo", "ll", "v6"]);
    }

    #[test]
    fn a_first_plan_labels_the_namespace_and_applies_all_three_objects() {
        let mut o = observed(vec![node("wina", &[("InternalIP", "10.0.0.10")])]);
        o.namespace_labels = Some(BTreeMap::new());
        let Plan::Writes(writes) = plan("winfleet", &o) else { panic!("writes expected") };
        let kinds: Vec<String> = writes.iter().map(|w| w.describe("winfleet")).collect();
        assert_eq!(
            kinds,
            [
                "label Namespace winfleet openshift.io/cluster-monitoring=true",
                "apply Service winfleet/windows-exporter",
                "apply Endpoints winfleet/windows-exporter (1 Windows node(s))",
                "apply ServiceMonitor winfleet/windows-exporter",
            ]
        );
    }

    #[test]
    fn objects_as_the_server_keeps_them_need_no_write_and_a_new_node_changes_only_the_endpoints() {
        let nodes = vec![node("wina", &[("InternalIP", "10.0.0.10")])];
        let mut o = observed(nodes.clone());
        let mut svc = service("winfleet");
        svc["spec"]["clusterIP"] = json!("172.30.0.5");
        svc["metadata"]["uid"] = json!("u");
        o.service = Some(svc);
        o.endpoints = Some(endpoints("winfleet", &nodes));
        o.service_monitor = Some(service_monitor("winfleet"));
        assert_eq!(plan("winfleet", &o), Plan::Writes(Vec::new()));
        o.nodes.push(node("winb", &[("InternalIP", "10.0.0.11")]));
        let Plan::Writes(writes) = plan("winfleet", &o) else { panic!() };
        assert_eq!(writes, [Write::Apply(endpoints("winfleet", &o.nodes))]);
        // The last node leaves: the subset goes, and an Endpoints without
        // subsets (as the server stores an empty list) is then in sync.
        o.nodes.clear();
        let Plan::Writes(writes) = plan("winfleet", &o) else { panic!() };
        assert_eq!(writes.len(), 1);
        let mut stored = endpoints("winfleet", &[]);
        stored.as_object_mut().unwrap().remove("subsets");
        o.endpoints = Some(stored);
        assert_eq!(plan("winfleet", &o), Plan::Writes(Vec::new()));
    }

    #[test]
    fn nothing_is_kept_without_servicemonitors_a_namespace_or_with_the_label_turned_off() {
        let mut o = observed(Vec::new());
        o.service_monitor_served = false;
        assert_eq!(plan("winfleet", &o), Plan::NotServed);
        let mut o = observed(Vec::new());
        o.namespace_labels = None;
        assert_eq!(plan("winfleet", &o), Plan::NoNamespace);
        let mut o = observed(Vec::new());
        o.namespace_labels = Some(BTreeMap::from([(MONITORING_LABEL.to_owned(), "false".to_owned())]));
        assert_eq!(plan("winfleet", &o), Plan::Disabled("false".into()));
    }

    #[test]
    fn covers_compares_lists_whole_and_maps_by_the_wanted_keys() {
        assert!(covers(&json!({"a": [1, {"b": 2}]}), &json!({"a": [1, {"b": 2, "c": 3}], "d": 4})));
        assert!(!covers(&json!({"a": [1]}), &json!({"a": [1, 2]})));
        assert!(!covers(&json!({"a": "x"}), &json!({})));
        assert!(covers(&json!({"a": []}), &json!({})));
    }
}
