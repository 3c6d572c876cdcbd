//! The one place where a failed Kubernetes API request becomes words: its
//! class (forbidden, not found, conflict, too many requests, server
//! timeout, unavailable, …) and a plain sentence naming the verb and the
//! object, for status, logs and reports. [`classify`] and [`sentence`] are
//! pure; [`describe`] only unpacks a `kube::Error`. Retries are not decided
//! here: callers read [`Class::transient`] (reads only: a write is never
//! retried blindly, the next round plans it again).

use std::fmt;

/// The class of a failed API request, from its HTTP code and Status reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// 401: the credentials were refused.
    Unauthorized,
    /// 403: authorization (RBAC, the Node authorizer) or admission refused it.
    Forbidden,
    /// 404.
    NotFound,
    /// 409: the object changed since it was read, or already exists.
    Conflict,
    /// 422: the object is invalid.
    Invalid,
    /// 429: throttled, or an eviction a PodDisruptionBudget refuses.
    TooManyRequests,
    /// 504, or reason `Timeout`/`ServerTimeout`.
    ServerTimeout,
    /// 503 (and 502): the API server cannot serve now.
    Unavailable,
    /// Any other status.
    Other,
    /// No answer: connection, TLS or decoding failed.
    Transport,
}

impl Class {
    /// The words that open the sentence.
    pub fn words(self) -> &'static str {
        match self {
            Class::Unauthorized => "unauthorized",
            Class::Forbidden => "forbidden",
            Class::NotFound => "not found",
            Class::Conflict => "conflict",
            Class::Invalid => "invalid",
            Class::TooManyRequests => "too many requests",
            Class::ServerTimeout => "server timeout",
            Class::Unavailable => "unavailable",
            Class::Other => "refused",
            Class::Transport => "no answer",
        }
    }

    /// Whether the same request may succeed later unchanged (a read may be
    /// retried; a write waits for the next round).
    pub fn transient(self) -> bool {
        matches!(self, Class::TooManyRequests | Class::ServerTimeout | Class::Unavailable | Class::Transport)
    }

    fn advice(self) -> &'static str {
        match self {
            Class::Unauthorized => "the API server refused winfleet's credentials",
            Class::Forbidden => "winfleet's identity has no RBAC rule for it (deploy/base/rbac.yaml)",
            Class::NotFound => "it does not exist",
            Class::Conflict => "it changed since winfleet read it; the next round reads it again",
            Class::Invalid => "the API server finds it invalid",
            Class::TooManyRequests => "the API server asks to wait; the next round tries again",
            Class::ServerTimeout => "the API server timed out; the next round tries again",
            Class::Unavailable => "the API server is unavailable; the next round tries again",
            Class::Other | Class::Transport => "the next round tries again",
        }
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.words())
    }
}

/// Classifies an API Status by code, then reason.
pub fn classify(code: u16, reason: &str) -> Class {
    match (code, reason) {
        (_, "Timeout" | "ServerTimeout") | (504, _) => Class::ServerTimeout,
        (401, _) => Class::Unauthorized,
        (403, _) => Class::Forbidden,
        (404, _) => Class::NotFound,
        (409, _) => Class::Conflict,
        (422, _) => Class::Invalid,
        (429, _) => Class::TooManyRequests,
        (502 | 503, _) => Class::Unavailable,
        _ => Class::Other,
    }
}

/// What was asked: the verb, the resource (plural, as RBAC names it) and
/// the object (`name` or `namespace/name`), when the caller knows them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Request<'a> {
    /// get, list, watch, create, patch, update, delete.
    pub verb: &'a str,
    /// nodes, machinesets, certificatesigningrequests, …
    pub resource: &'a str,
    /// The object, when the request names one.
    pub object: Option<&'a str>,
}

/// The API server's answer, as the pure part reads it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Answer<'a> {
    /// HTTP code.
    pub code: u16,
    /// Status reason (Forbidden, Conflict, …).
    pub reason: &'a str,
    /// Status message.
    pub message: &'a str,
    /// `details.kind` (for RBAC denials: the resource) and `details.name`.
    pub details: (&'a str, &'a str),
}

/// The verb and resource of an authorizer's denial ("… cannot list
/// resource \"nodes\" …"), when the caller did not say.
fn denied(message: &str) -> Option<(&str, &str)> {
    let rest = &message[message.find(" cannot ")? + " cannot ".len()..];
    let (verb, rest) = rest.split_once(" resource \"")?;
    let (resource, _) = rest.split_once('"')?;
    (!verb.contains(' ')).then_some((verb, resource))
}

/// The advice of a server-side apply's 409 (`Apply failed with N
/// conflict(s)`): a field another field manager owns, not a stale read.
const APPLY_CONFLICT: &str = "another field manager owns a field winfleet sets, with another value; \
                              nothing is overwritten (docs/cluster.md, MachineSets)";

/// The advice of a refusal by one of the cluster's validating admission
/// webhooks (on OpenShift, machine-api-operator's for MachineSets): not
/// an RBAC matter, whatever the code (403 by default).
const ADMISSION_DENIED: &str = "an admission webhook of the cluster refused it; the object winfleet writes must \
                                change as the webhook's message says";

/// Whether the API server's message is an admission webhook's refusal
/// (`admission webhook "<name>" denied the request: …`).
fn admission_denied(message: &str) -> bool {
    message.starts_with("admission webhook \"") && message.contains("\" denied the request")
}

/// The plain sentence: `<class>: cannot <verb> <resource> [<object>]:
/// <advice> (<code> <reason>: <the API server's message>)`.
pub fn sentence(answer: &Answer<'_>, request: Option<&Request<'_>>) -> String {
    let class = classify(answer.code, answer.reason);
    let apply_conflict = class == Class::Conflict && answer.message.starts_with("Apply failed with ");
    let advice = if apply_conflict {
        APPLY_CONFLICT
    } else if admission_denied(answer.message) {
        ADMISSION_DENIED
    } else {
        class.advice()
    };
    let (verb, resource, object) = match request {
        Some(r) => (r.verb, r.resource, r.object.unwrap_or_default()),
        None => match denied(answer.message) {
            Some((verb, resource)) => (verb, resource, answer.details.1),
            None => ("", answer.details.0, answer.details.1),
        },
    };
    let what = [resource, object].iter().filter(|s| !s.is_empty()).copied().collect::<Vec<_>>().join(" ");
    let asked = match (verb.is_empty(), what.is_empty()) {
        (false, false) => format!("cannot {verb} {what}: "),
        (false, true) => format!("cannot {verb}: "),
        (true, false) => format!("{what}: "),
        (true, true) => String::new(),
    };
    format!("{class}: {asked}{advice} ({} {}: {})", answer.code, answer.reason, answer.message)
}

/// The field and message of each `FieldManagerConflict` cause of a
/// server-side apply's 409 (`.spec.replicas`, `conflict with "kubectl-edit"
/// using machine.openshift.io/v1beta1`); empty for any other error.
pub fn field_conflicts(e: &kube::Error) -> Vec<(String, String)> {
    let kube::Error::Api(status) = e else { return Vec::new() };
    if classify(status.code, &status.reason) != Class::Conflict {
        return Vec::new();
    }
    let causes = status.details.iter().flat_map(|d| &d.causes);
    causes.filter(|c| c.reason == "FieldManagerConflict").map(|c| (c.field.clone(), c.message.clone())).collect()
}

/// The class of a `kube::Error`.
pub fn class(e: &kube::Error) -> Class {
    match e {
        kube::Error::Api(status) => classify(status.code, &status.reason),
        _ => Class::Transport,
    }
}

/// A `kube::Error` as a plain sentence ([`sentence`]); a transport
/// failure is "no answer: cannot <verb> <object>: <error>".
pub fn describe(e: &kube::Error, request: Option<&Request<'_>>) -> String {
    match e {
        kube::Error::Api(status) => {
            let details = status.details.as_ref();
            let answer = Answer {
                code: status.code,
                reason: &status.reason,
                message: &status.message,
                details: (details.map_or("", |d| d.kind.as_str()), details.map_or("", |d| d.name.as_str())),
            };
            sentence(&answer, request)
        }
        other => match request {
            Some(r) => {
                let object = r.object.map(|o| format!(" {o}")).unwrap_or_default();
                format!("{}: cannot {} {}{object}: {other}", Class::Transport, r.verb, r.resource)
            }
            None => format!("{}: {other}", Class::Transport),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer<'a>(code: u16, reason: &'a str, message: &'a str) -> Answer<'a> {
        Answer { code, reason, message, details: ("", "") }
    }

    #[test]
    fn a_webhook_refusal_is_the_webhooks_not_a_missing_rbac_rule() {
        let message = "admission webhook \"validation.machineset.machine.openshift.io\" denied the request: \
                       spec.selector: Forbidden: selector is immutable";
        let answer = Answer { details: ("machinesets", "winworker"), ..answer(403, "Forbidden", message) };
        let request =
            Request { verb: "patch", resource: "machinesets", object: Some("openshift-machine-api/winworker") };
        let text = sentence(&answer, Some(&request));
        assert!(
            text.starts_with(
                "forbidden: cannot patch machinesets openshift-machine-api/winworker: an admission webhook of the \
                 cluster refused it"
            ),
            "{text}"
        );
        assert!(!text.contains("RBAC"), "{text}");
        assert!(text.ends_with("selector is immutable)"), "{text}");
    }

    #[test]
    fn each_code_has_its_class() {
        let cases = [
            (401, "Unauthorized", Class::Unauthorized),
            (403, "Forbidden", Class::Forbidden),
            (404, "NotFound", Class::NotFound),
            (409, "Conflict", Class::Conflict),
            (409, "AlreadyExists", Class::Conflict),
            (422, "Invalid", Class::Invalid),
            (429, "TooManyRequests", Class::TooManyRequests),
            (504, "Timeout", Class::ServerTimeout),
            (500, "Timeout", Class::ServerTimeout),
            (503, "ServiceUnavailable", Class::Unavailable),
            (500, "InternalError", Class::Other),
        ];
        for (code, reason, class) in cases {
            assert_eq!(classify(code, reason), class, "{code} {reason}");
        }
        assert!(Class::Unavailable.transient() && !Class::Conflict.transient() && !Class::Forbidden.transient());
    }

    #[test]
    fn a_known_request_names_its_verb_and_object() {
        let request = Request { verb: "patch", resource: "machinesets", object: Some("openshift-machine-api/winb") };
        let text = sentence(&answer(409, "Conflict", "the object has been modified"), Some(&request));
        assert_eq!(
            text,
            "conflict: cannot patch machinesets openshift-machine-api/winb: it changed since winfleet read it; \
             the next round reads it again (409 Conflict: the object has been modified)"
        );
    }

    #[test]
    fn an_rbac_denial_names_its_verb_and_resource_from_the_server() {
        // kube-apiserver v1.37.2's words for a missing rule.
        let message = "proxies.config.openshift.io \"cluster\" is forbidden: User \
                       \"system:serviceaccount:winfleet:winfleet\" cannot get resource \"proxies\" in API group \
                       \"config.openshift.io\" at the cluster scope";
        let denial = Answer { details: ("proxies", "cluster"), ..answer(403, "Forbidden", message) };
        let text = sentence(&denial, None);
        assert!(
            text.starts_with("forbidden: cannot get proxies cluster: winfleet's identity has no RBAC rule"),
            "{text}"
        );
        let list =
            "nodes is forbidden: User \"u\" cannot list resource \"nodes\" in API group \"\" at the cluster scope";
        let text = sentence(&Answer { details: ("nodes", ""), ..answer(403, "Forbidden", list) }, None);
        assert!(text.starts_with("forbidden: cannot list nodes: "), "{text}");
    }

    #[test]
    fn an_apply_conflict_says_whose_field_it_is_not_that_the_object_changed() {
        // kube-apiserver v1.37.2's words for a non-forced apply against another manager's field.
        let message = "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using \
                       machine.openshift.io/v1beta1: .spec.replicas";
        let request = Request { verb: "patch", resource: "machinesets", object: Some("openshift-machine-api/winb") };
        let text = sentence(&answer(409, "Conflict", message), Some(&request));
        assert!(
            text.starts_with(
                "conflict: cannot patch machinesets openshift-machine-api/winb: another field manager owns"
            ),
            "{text}"
        );
        assert!(text.ends_with(": .spec.replicas)"), "{text}");
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "code": 409, "reason": "Conflict", "message": message,
            "details": {"causes": [{"reason": "FieldManagerConflict", "field": ".spec.replicas",
                                    "message": "conflict with \"kubectl-edit\" using machine.openshift.io/v1beta1"}]},
        }))
        .unwrap();
        let causes = field_conflicts(&kube::Error::Api(Box::new(status)));
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].0, ".spec.replicas");
    }

    #[test]
    fn an_answer_without_a_request_still_reads_plainly() {
        let text = sentence(&answer(503, "ServiceUnavailable", "etcd is down"), None);
        assert_eq!(
            text,
            "unavailable: the API server is unavailable; the next round tries again (503 ServiceUnavailable: etcd is down)"
        );
        let text =
            sentence(&answer(504, "Timeout", "slow"), Some(&Request { verb: "list", resource: "pods", object: None }));
        assert!(text.starts_with("server timeout: cannot list pods: "), "{text}");
        let text = sentence(&answer(429, "TooManyRequests", "budget"), None);
        assert!(text.starts_with("too many requests: the API server asks to wait"), "{text}");
    }
}
