//! One pass over the pending CertificateSigningRequests: approve the
//! listed hosts' kubelet CSRs that pass the rules of [`super::csr`], report
//! the others that concern a listed host (an Event on the CSR), leave every
//! other CSR alone.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde::Serialize;
use serde_json::json;

use super::FIELD_MANAGER;
use super::apply::api_error;
use super::csr::{self, CsrObs, Decision, Kind};
use super::events::{Events, Reason, Regarding};

/// The condition reason of winfleet's approvals.
pub const APPROVAL_REASON: &str = "WinfleetApprove";

/// What a pass did about one CSR that concerns a listed host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CsrReport {
    /// The CSR.
    pub csr: String,
    /// The node name it asks for.
    pub node: String,
    /// What happened.
    #[serde(flatten)]
    pub outcome: CsrOutcome,
}

/// The outcome for one CSR.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum CsrOutcome {
    /// Approved.
    Approved {
        /// The instance whose kubelet asked.
        instance: String,
        /// Client or serving.
        kind: Kind,
    },
    /// A listed host's, but the rules say no (or the approval failed).
    Refused {
        /// The instance it names.
        instance: String,
        /// Why.
        reason: String,
    },
    /// Close to a listed host's name, not equal: never approved.
    NearMatch {
        /// The instances whose host names it resembles.
        resembles: Vec<String>,
    },
}

/// Reads the CSRs as observed.
pub async fn list(client: &Client) -> Result<Vec<CsrObs>, kube::Error> {
    let api: Api<CertificateSigningRequest> = Api::all(client.clone());
    Ok(api.list(&ListParams::default()).await?.items.iter().map(obs).collect())
}

fn obs(csr: &CertificateSigningRequest) -> CsrObs {
    let conditions = csr.status.as_ref().and_then(|s| s.conditions.as_ref());
    let decided = conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "Approved" || c.type_ == "Denied"));
    CsrObs {
        name: csr.metadata.name.clone().unwrap_or_default(),
        uid: csr.metadata.uid.clone().unwrap_or_default(),
        request: csr.spec.request.0.clone(),
        signer: csr.spec.signer_name.clone(),
        usages: csr.spec.usages.clone().unwrap_or_default(),
        username: csr.spec.username.clone().unwrap_or_default(),
        groups: csr.spec.groups.clone().unwrap_or_default(),
        pending: !decided,
    }
}

/// One pass: `hosts` maps each listed instance to its observed host name.
/// `reported` remembers near matches and refusals already reported in this
/// process, so a CSR is reported once, not every pass.
pub async fn pass(
    client: &Client,
    events: &Events,
    hosts: &BTreeMap<String, String>,
    reported: &mut BTreeSet<String>,
) -> Result<Vec<CsrReport>, String> {
    let csrs = list(client).await.map_err(|e| format!("cannot list CSRs: {}", api_error(&e)))?;
    let nodes: Api<Node> = Api::all(client.clone());
    let mut out = Vec::new();
    for csr in csrs.iter().filter(|c| c.pending) {
        let Ok(request) = csr::parse_request(&csr.request) else { continue };
        let report = match csr::classify(&request, hosts) {
            Decision::Ignore => continue,
            Decision::NearMatch { node, resembles } => {
                let outcome = CsrOutcome::NearMatch { resembles: resembles.iter().map(|(a, _)| a.clone()).collect() };
                if reported.insert(csr.name.clone()) {
                    let names: Vec<String> = resembles.iter().map(|(a, h)| format!("{h} ({a})")).collect();
                    let note = format!(
                        "not approved: node name {node:?} is close to, but not, the host name of listed instance(s) {}; \
                         winfleet approves exact host names only",
                        names.join(", ")
                    );
                    events.publish(Regarding::Csr(&csr.name, &csr.uid), Reason::CsrNearMatch, note).await;
                }
                CsrReport { csr: csr.name.clone(), node, outcome }
            }
            Decision::Candidate { node, kind, instance } => {
                let exists = match nodes.get_opt(&node).await {
                    Ok(found) => found.is_some(),
                    Err(e) => return Err(format!("cannot read Node {node}: {}", api_error(&e))),
                };
                let outcome = match csr::check(csr, &request, kind, &node, exists) {
                    Ok(()) => match approve(client, csr, &instance).await {
                        // Another approver (OpenShift's cluster-machine-approver
                        // for a Machine's kubelet) changed the CSR first: its
                        // decision stands, the next pass sees it; no error.
                        Ok(false) => continue,
                        Ok(true) => {
                            let note = format!(
                                "approved the kubelet {kind:?} certificate of instance {instance} (node {node})"
                            );
                            events.publish(Regarding::Csr(&csr.name, &csr.uid), Reason::CsrApproved, note).await;
                            CsrOutcome::Approved { instance, kind }
                        }
                        Err(reason) => CsrOutcome::Refused { instance, reason: format!("approval failed: {reason}") },
                    },
                    Err(reason) => {
                        if reported.insert(csr.name.clone()) {
                            let note = format!("not approved for instance {instance}: {reason}");
                            events.publish(Regarding::Csr(&csr.name, &csr.uid), Reason::CsrRefused, note).await;
                        }
                        CsrOutcome::Refused { instance, reason }
                    }
                };
                CsrReport { csr: csr.name.clone(), node, outcome }
            }
        };
        out.push(report);
    }
    Ok(out)
}

/// Approves `csr`: `Ok(false)` when the API answers 409 Conflict (another
/// approver wrote the CSR since it was read).
async fn approve(client: &Client, csr: &CsrObs, instance: &str) -> Result<bool, String> {
    let api: Api<CertificateSigningRequest> = Api::all(client.clone());
    let condition = json!({
        "type": "Approved",
        "status": "True",
        "reason": APPROVAL_REASON,
        "message": format!("approved by winfleet: the node name is the host name of listed instance {instance}"),
    });
    let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..PatchParams::default() };
    let patch = json!({ "status": { "conditions": [condition] } });
    match api.patch_approval(&csr.name, &params, &Patch::Merge(&patch)).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
        Err(e) => Err(api_error(&e)),
    }
}
