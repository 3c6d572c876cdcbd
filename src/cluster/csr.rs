//! Kubelet certificate signing requests of joining hosts: which pending CSR
//! winfleet approves, and which it reports and leaves alone. The rules are
//! pure; [`crate::cluster::approve`] reads and writes the API.
//!
//! A CSR is a candidate only when its node name (the subject CN after
//! `system:node:`) equals the observed host name of a listed instance,
//! case-insensitively and without a trailing dot (WMCO-SPEC decision 9;
//! WMCO accepts any substring). A name that is a substring or superstring
//! of a listed host is a near match: reported, never approved. Then WMCO's
//! rules (WMCO-SPEC 3.6), with winfleet's stricter additions (the signer
//! must match the kind, and a serving CSR must come from the node itself):
//!
//! - client (bootstrap) CSR: organisation exactly `system:nodes`, no DNS,
//!   IP, email or URI names, usages within {digital signature, key
//!   encipherment, client auth} with at least two, signer
//!   `kubernetes.io/kube-apiserver-client-kubelet`, and no Node of that
//!   name exists yet;
//! - serving CSR: organisation exactly `system:nodes`, groups include
//!   `system:nodes` and `system:authenticated`, requested by
//!   `system:node:<name>`, usages within {digital signature, key
//!   encipherment, server auth} with at least two, signer
//!   `kubernetes.io/kubelet-serving`, and the Node exists.

use std::collections::BTreeMap;

use x509_parser::extensions::GeneralName;
use x509_parser::prelude::FromDer;

/// The prefix of a node's user name and CSR subject.
pub const NODE_PREFIX: &str = "system:node:";
/// The nodes' group and subject organisation.
pub const NODES_GROUP: &str = "system:nodes";
/// The kubelet client signer.
pub const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// The kubelet serving signer.
pub const SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";

/// A CSR as observed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CsrObs {
    /// Name.
    pub name: String,
    /// UID (Events refer to it).
    pub uid: String,
    /// `spec.request`: the PEM request.
    pub request: Vec<u8>,
    /// `spec.signerName`.
    pub signer: String,
    /// `spec.usages`.
    pub usages: Vec<String>,
    /// `spec.username`.
    pub username: String,
    /// `spec.groups`.
    pub groups: Vec<String>,
    /// Neither Approved nor Denied yet.
    pub pending: bool,
}

/// What a request asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Request {
    /// Subject CN.
    pub common_name: String,
    /// Subject O values.
    pub organizations: Vec<String>,
    /// DNS names, IP addresses, email addresses and URIs asked for.
    pub alt_names: usize,
}

/// Parses a PEM `CERTIFICATE REQUEST`.
pub fn parse_request(pem: &[u8]) -> Result<Request, String> {
    let (_, block) = x509_parser::pem::parse_x509_pem(pem).map_err(|e| format!("not a PEM block: {e}"))?;
    if block.label != "CERTIFICATE REQUEST" {
        return Err(format!("PEM block type {} is not CERTIFICATE REQUEST", block.label));
    }
    let (_, csr) = x509_parser::certification_request::X509CertificationRequest::from_der(&block.contents)
        .map_err(|e| format!("not a PKCS#10 request: {e}"))?;
    let subject = &csr.certification_request_info.subject;
    let common_name = subject.iter_common_name().next().and_then(|cn| cn.as_str().ok()).unwrap_or_default().to_owned();
    let organizations = subject.iter_organization().filter_map(|o| o.as_str().ok()).map(str::to_owned).collect();
    let mut alt_names = 0;
    if let Some(extensions) = csr.requested_extensions() {
        for extension in extensions {
            if let x509_parser::extensions::ParsedExtension::SubjectAlternativeName(san) = extension {
                alt_names += san
                    .general_names
                    .iter()
                    .filter(|n| {
                        matches!(
                            n,
                            GeneralName::DNSName(_)
                                | GeneralName::IPAddress(_)
                                | GeneralName::RFC822Name(_)
                                | GeneralName::URI(_)
                        )
                    })
                    .count();
            }
        }
    }
    Ok(Request { common_name, organizations, alt_names })
}

/// Which kind of kubelet certificate a request is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Kind {
    /// The kubelet's client certificate (bootstrap).
    Client,
    /// The kubelet's serving certificate.
    Serving,
}

/// What to do with one pending CSR.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Not a node CSR of a listed host: left alone silently.
    Ignore,
    /// A listed host's CSR: approve it when [`check`] agrees.
    Candidate {
        /// The node name it asks for.
        node: String,
        /// Client or serving.
        kind: Kind,
        /// The instance whose host name it is.
        instance: String,
    },
    /// A node name close to a listed host's but not equal: reported.
    NearMatch {
        /// The node name it asks for.
        node: String,
        /// The listed instances and host names it resembles.
        resembles: Vec<(String, String)>,
    },
}

/// A host name as compared: lower case, no trailing dot.
pub fn normalize(name: &str) -> String {
    name.trim().trim_end_matches('.').to_lowercase()
}

/// Classifies a pending CSR against the listed instances' observed host
/// names (instance address → host name).
pub fn classify(request: &Request, hosts: &BTreeMap<String, String>) -> Decision {
    let Some(node) = request.common_name.strip_prefix(NODE_PREFIX) else { return Decision::Ignore };
    let wanted = normalize(node);
    if wanted.is_empty() {
        return Decision::Ignore;
    }
    let kind =
        if request.organizations == [NODES_GROUP] && request.alt_names == 0 { Kind::Client } else { Kind::Serving };
    if let Some((instance, _)) = hosts.iter().find(|(_, host)| normalize(host) == wanted) {
        return Decision::Candidate { node: node.to_owned(), kind, instance: instance.clone() };
    }
    let resembles: Vec<(String, String)> = hosts
        .iter()
        .filter(|(_, host)| {
            let host = normalize(host);
            !host.is_empty() && (host.contains(&wanted) || wanted.contains(&host))
        })
        .map(|(a, h)| (a.clone(), h.clone()))
        .collect();
    if resembles.is_empty() { Decision::Ignore } else { Decision::NearMatch { node: node.to_owned(), resembles } }
}

/// WMCO's rules and winfleet's for a candidate: `Ok` to approve, or why not.
pub fn check(csr: &CsrObs, request: &Request, kind: Kind, node: &str, node_exists: bool) -> Result<(), String> {
    if request.organizations != [NODES_GROUP] {
        return Err(format!("subject organisation {:?} is not exactly [{NODES_GROUP}]", request.organizations));
    }
    let (signer, allowed, needed): (&str, &[&str], &str) = match kind {
        Kind::Client => (CLIENT_SIGNER, &["digital signature", "key encipherment", "client auth"], "client auth"),
        Kind::Serving => (SERVING_SIGNER, &["digital signature", "key encipherment", "server auth"], "server auth"),
    };
    if csr.signer != signer {
        return Err(format!("signer {:?} is not {signer}", csr.signer));
    }
    let usages_ok = csr.usages.len() >= 2
        && csr.usages.iter().all(|u| allowed.contains(&u.as_str()))
        && csr.usages.iter().any(|u| u == needed);
    if !usages_ok {
        return Err(format!("usages {:?} are not a kubelet {kind:?} certificate's", csr.usages));
    }
    match kind {
        Kind::Client if node_exists => {
            Err(format!("a Node named {node} already exists: a client CSR is only for a host that has not joined"))
        }
        Kind::Client => Ok(()),
        Kind::Serving if !node_exists => Err(format!("Node {node} does not exist: a serving CSR needs its Node")),
        Kind::Serving => {
            let has = |g: &str| csr.groups.iter().any(|x| x == g);
            if !has(NODES_GROUP) || !has("system:authenticated") {
                return Err(format!("groups {:?} lack {NODES_GROUP} or system:authenticated", csr.groups));
            }
            if csr.username != format!("{NODE_PREFIX}{node}") {
                return Err(format!("requested by {:?}, not by the node itself", csr.username));
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(cn: &str, org: &[&str], alt: usize) -> Request {
        Request { common_name: cn.into(), organizations: org.iter().map(|o| (*o).to_owned()).collect(), alt_names: alt }
    }

    fn hosts() -> BTreeMap<String, String> {
        [("10.0.0.1".to_owned(), "WIN-NODE-1".to_owned()), ("10.0.0.2".to_owned(), "win-node-12.".to_owned())].into()
    }

    #[test]
    fn only_exact_host_names_are_candidates() {
        let client = request("system:node:win-node-1", &[NODES_GROUP], 0);
        assert_eq!(
            classify(&client, &hosts()),
            Decision::Candidate { node: "win-node-1".into(), kind: Kind::Client, instance: "10.0.0.1".into() }
        );
        let serving = request("system:node:win-node-12", &[NODES_GROUP], 2);
        assert!(matches!(classify(&serving, &hosts()), Decision::Candidate { kind: Kind::Serving, .. }));
        let near = classify(&request("system:node:win-node", &[NODES_GROUP], 0), &hosts());
        assert!(matches!(&near, Decision::NearMatch { resembles, .. } if resembles.len() == 2), "{near:?}");
        let sup = classify(&request("system:node:win-node-1-evil", &[NODES_GROUP], 0), &hosts());
        assert!(matches!(&sup, Decision::NearMatch { resembles, .. } if resembles[0].0 == "10.0.0.1"), "{sup:?}");
        assert_eq!(classify(&request("system:node:other", &[NODES_GROUP], 0), &hosts()), Decision::Ignore);
        assert_eq!(classify(&request("alice", &[], 0), &hosts()), Decision::Ignore);
    }

    #[test]
    fn wmcos_rules_and_winfleets_decide_a_candidate() {
        let csr = CsrObs {
            signer: CLIENT_SIGNER.into(),
            usages: vec!["digital signature".into(), "client auth".into()],
            ..CsrObs::default()
        };
        let client = request("system:node:n", &[NODES_GROUP], 0);
        assert_eq!(check(&csr, &client, Kind::Client, "n", false), Ok(()));
        assert!(check(&csr, &client, Kind::Client, "n", true).unwrap_err().contains("already exists"));
        let wrong_signer = CsrObs { signer: SERVING_SIGNER.into(), ..csr.clone() };
        assert!(check(&wrong_signer, &client, Kind::Client, "n", false).is_err());
        let one_usage = CsrObs { usages: vec!["client auth".into()], ..csr.clone() };
        assert!(check(&one_usage, &client, Kind::Client, "n", false).is_err());
        let serving = CsrObs {
            signer: SERVING_SIGNER.into(),
            usages: vec!["digital signature".into(), "server auth".into()],
            username: "system:node:n".into(),
            groups: vec![NODES_GROUP.into(), "system:authenticated".into()],
            ..CsrObs::default()
        };
        let req = request("system:node:n", &[NODES_GROUP], 2);
        assert_eq!(check(&serving, &req, Kind::Serving, "n", true), Ok(()));
        assert!(check(&serving, &req, Kind::Serving, "n", false).is_err());
        let impostor = CsrObs { username: "system:node:m".into(), ..serving.clone() };
        assert!(check(&impostor, &req, Kind::Serving, "n", true).unwrap_err().contains("not by the node itself"));
        let two_orgs = request("system:node:n", &[NODES_GROUP, "x"], 2);
        assert!(check(&serving, &two_orgs, Kind::Serving, "n", true).is_err());
    }
}
