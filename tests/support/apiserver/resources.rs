//! The served resource types and request-path parsing.

/// One served resource type (the analogue of an APIResource in discovery).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Resource {
    /// API group; "" is the core group.
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub namespaced: bool,
    /// Whether it has a `status` subresource (see [`Resource::has_status`]).
    pub status: Status,
    /// Field selector labels besides metadata.name / metadata.namespace,
    /// each with the JSON path it reads.
    pub fields: &'static [(&'static str, &'static [&'static str])],
}

/// Where a type's status subresource is declared.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Status {
    /// A built-in type with a status subresource.
    Yes,
    /// A built-in type without one.
    No,
    /// A custom resource: its CRD in tests/controlplane/crds says
    /// ([`super::crd`]), as on the real control plane.
    Crd,
}

impl Resource {
    /// Has a `status` subresource: writes to the main resource keep the
    /// stored status, writes to `/status` change only the status (and a
    /// custom resource's create drops it).
    pub fn has_status(&self) -> bool {
        match self.status {
            Status::Yes => true,
            Status::No => false,
            Status::Crd => self.crd().is_some_and(|c| c.status),
        }
    }

    /// The CRD of a custom resource (its status subresource and schema).
    pub fn crd(&self) -> Option<&'static super::crd::Crd> {
        match self.status {
            Status::Crd => super::crd::find(self.group, self.plural),
            Status::Yes | Status::No => None,
        }
    }

    /// `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.to_string() } else { format!("{}/{}", self.group, self.version) }
    }

    /// The qualified resource as used in error messages: `pods`, `machinesets.machine.openshift.io`.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() { self.plural.to_string() } else { format!("{}.{}", self.plural, self.group) }
    }

    /// Whether this is the CertificateSigningRequest type.
    pub fn is_csr(&self) -> bool {
        self.group == "certificates.k8s.io" && self.plural == "certificatesigningrequests"
    }

    /// The key of this type in the store.
    pub fn key(&self) -> (&'static str, &'static str) {
        (self.group, self.plural)
    }
}

const POD_FIELDS: &[(&str, &[&str])] = &[
    ("spec.nodeName", &["spec", "nodeName"]),
    ("spec.restartPolicy", &["spec", "restartPolicy"]),
    ("spec.schedulerName", &["spec", "schedulerName"]),
    ("spec.serviceAccountName", &["spec", "serviceAccountName"]),
    ("status.phase", &["status", "phase"]),
    ("status.podIP", &["status", "podIP"]),
    ("status.nominatedNodeName", &["status", "nominatedNodeName"]),
];
const NODE_FIELDS: &[(&str, &[&str])] = &[("spec.unschedulable", &["spec", "unschedulable"])];
const CORE_EVENT_FIELDS: &[(&str, &[&str])] = &[
    ("involvedObject.kind", &["involvedObject", "kind"]),
    ("involvedObject.namespace", &["involvedObject", "namespace"]),
    ("involvedObject.name", &["involvedObject", "name"]),
    ("involvedObject.uid", &["involvedObject", "uid"]),
    ("reason", &["reason"]),
    ("type", &["type"]),
    ("source", &["source", "component"]),
];

/// Every served resource type.
pub(crate) static RESOURCES: &[Resource] = &[
    Resource {
        group: "",
        version: "v1",
        kind: "Node",
        plural: "nodes",
        namespaced: false,
        status: Status::Yes,
        fields: NODE_FIELDS,
    },
    Resource {
        group: "",
        version: "v1",
        kind: "Pod",
        plural: "pods",
        namespaced: true,
        status: Status::Yes,
        fields: POD_FIELDS,
    },
    Resource {
        group: "",
        version: "v1",
        kind: "Event",
        plural: "events",
        namespaced: true,
        status: Status::No,
        fields: CORE_EVENT_FIELDS,
    },
    Resource {
        group: "policy",
        version: "v1",
        kind: "PodDisruptionBudget",
        plural: "poddisruptionbudgets",
        namespaced: true,
        status: Status::Yes,
        fields: &[],
    },
    Resource {
        group: "events.k8s.io",
        version: "v1",
        kind: "Event",
        plural: "events",
        namespaced: true,
        status: Status::No,
        fields: &[],
    },
    Resource {
        group: "machine.openshift.io",
        version: "v1beta1",
        kind: "MachineSet",
        plural: "machinesets",
        namespaced: true,
        status: Status::Crd,
        fields: &[],
    },
    Resource {
        group: "machine.openshift.io",
        version: "v1beta1",
        kind: "Machine",
        plural: "machines",
        namespaced: true,
        status: Status::Crd,
        fields: &[],
    },
    Resource {
        group: "machine.openshift.io",
        version: "v1beta1",
        kind: "MachineHealthCheck",
        plural: "machinehealthchecks",
        namespaced: true,
        status: Status::Crd,
        fields: &[],
    },
    Resource {
        group: "config.openshift.io",
        version: "v1",
        kind: "ImageDigestMirrorSet",
        plural: "imagedigestmirrorsets",
        namespaced: false,
        status: Status::Crd,
        fields: &[],
    },
    Resource {
        group: "config.openshift.io",
        version: "v1",
        kind: "ImageTagMirrorSet",
        plural: "imagetagmirrorsets",
        namespaced: false,
        status: Status::Crd,
        fields: &[],
    },
    Resource {
        group: "config.openshift.io",
        version: "v1",
        kind: "Proxy",
        plural: "proxies",
        namespaced: false,
        status: Status::Crd,
        fields: &[],
    },
    Resource {
        group: "certificates.k8s.io",
        version: "v1",
        kind: "CertificateSigningRequest",
        plural: "certificatesigningrequests",
        namespaced: false,
        status: Status::Yes,
        fields: &[("spec.signerName", &["spec", "signerName"])],
    },
    Resource {
        group: "",
        version: "v1",
        kind: "Secret",
        plural: "secrets",
        namespaced: true,
        status: Status::No,
        fields: &[],
    },
    Resource {
        group: "",
        version: "v1",
        kind: "ServiceAccount",
        plural: "serviceaccounts",
        namespaced: true,
        status: Status::No,
        fields: &[],
    },
    Resource {
        group: "",
        version: "v1",
        kind: "ConfigMap",
        plural: "configmaps",
        namespaced: true,
        status: Status::No,
        fields: &[],
    },
    Resource {
        group: "config.openshift.io",
        version: "v1",
        kind: "Infrastructure",
        plural: "infrastructures",
        namespaced: false,
        status: Status::Crd,
        fields: &[],
    },
    Resource {
        group: "config.openshift.io",
        version: "v1",
        kind: "Network",
        plural: "networks",
        namespaced: false,
        status: Status::Crd,
        fields: &[],
    },
    // The cluster network operator's Network (the hybrid overlay: network-conf.ps1, the VXLAN port).
    Resource {
        group: "operator.openshift.io",
        version: "v1",
        kind: "Network",
        plural: "networks",
        namespaced: false,
        status: Status::Crd,
        fields: &[],
    },
    Resource {
        group: "machineconfiguration.openshift.io",
        version: "v1",
        kind: "ControllerConfig",
        plural: "controllerconfigs",
        namespaced: false,
        status: Status::Crd,
        fields: &[],
    },
    // The worker pool and its rendered MachineConfigs (issue 36: the files a
    // node takes from the worker ignition, src/cluster/machine_config.rs).
    Resource {
        group: "machineconfiguration.openshift.io",
        version: "v1",
        kind: "MachineConfigPool",
        plural: "machineconfigpools",
        namespaced: false,
        status: Status::Crd,
        fields: &[],
    },
    Resource {
        group: "machineconfiguration.openshift.io",
        version: "v1",
        kind: "MachineConfig",
        plural: "machineconfigs",
        namespaced: false,
        status: Status::Crd,
        fields: &[],
    },
    Resource {
        group: "coordination.k8s.io",
        version: "v1",
        kind: "Lease",
        plural: "leases",
        namespaced: true,
        status: Status::No,
        fields: &[],
    },
    // Windows node monitoring (src/cluster/monitoring/): winfleet's namespace,
    // the windows-exporter Service, Endpoints and ServiceMonitor.
    Resource {
        group: "",
        version: "v1",
        kind: "Namespace",
        plural: "namespaces",
        namespaced: false,
        status: Status::Yes,
        fields: &[],
    },
    Resource {
        group: "",
        version: "v1",
        kind: "Service",
        plural: "services",
        namespaced: true,
        status: Status::Yes,
        fields: &[],
    },
    Resource {
        group: "",
        version: "v1",
        kind: "Endpoints",
        plural: "endpoints",
        namespaced: true,
        status: Status::No,
        fields: &[],
    },
    Resource {
        group: "monitoring.coreos.com",
        version: "v1",
        kind: "ServiceMonitor",
        plural: "servicemonitors",
        namespaced: true,
        status: Status::Crd,
        fields: &[],
    },
];

/// The resource served under `group`/`version` as `plural`.
pub(crate) fn by_path(group: &str, version: &str, plural: &str) -> Option<&'static Resource> {
    RESOURCES.iter().find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The resource for an object's `apiVersion` and `kind`.
pub(crate) fn by_kind(api_version: &str, kind: &str) -> Option<&'static Resource> {
    RESOURCES.iter().find(|r| r.api_version() == api_version && r.kind == kind)
}

/// What a request path addresses.
#[derive(Debug)]
pub(crate) struct Target {
    pub res: &'static Resource,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

/// Parses `/api/v1/...` and `/apis/{group}/{version}/...`; None when the
/// path addresses nothing served (the caller answers 404).
pub(crate) fn parse_path(path: &str) -> Option<Target> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, plural, rest @ ..] => {
            (Some((*ns).to_string()), std::iter::once(plural).chain(rest).collect::<Vec<_>>())
        }
        other => (None, other.iter().collect::<Vec<_>>()),
    };
    let (plural, name, sub) = match rest.as_slice() {
        [plural] => (**plural, None, None),
        [plural, name] => (**plural, Some((**name).to_string()), None),
        [plural, name, sub] => (**plural, Some((**name).to_string()), Some((**sub).to_string())),
        _ => return None,
    };
    let res = by_path(group, version, plural)?;
    if !res.namespaced && namespace.is_some() {
        return None;
    }
    if res.namespaced && namespace.is_none() && name.is_some() {
        return None;
    }
    match sub.as_deref() {
        None => {}
        Some("status") if res.has_status() => {}
        Some("eviction") if res.group.is_empty() && res.plural == "pods" => {}
        Some("token") if res.group.is_empty() && res.plural == "serviceaccounts" => {}
        Some("approval") if res.plural == "certificatesigningrequests" => {}
        Some("scale") if super::scale::served(res) => {}
        Some(_) => return None,
    }
    Some(Target { res, namespace, name, subresource: sub })
}
