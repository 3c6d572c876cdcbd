//! CertificateSigningRequests as kube-apiserver serves them
//! (certificates.k8s.io/v1), and the kube-controller-manager's signer for
//! the two kubelet signers, run synchronously on the approving write.
//!
//! - Create: `spec.request` must be one PEM `CERTIFICATE REQUEST` that
//!   parses; `spec.signerName` and `spec.usages` are required (known
//!   usages only); the server sets `spec.username`, `spec.uid` and
//!   `spec.groups` from the requester and drops any `status`. 422 with
//!   field causes otherwise.
//! - `/status` may not add or remove Approved or Denied conditions; only
//!   `/approval` can, and never both, never remove one once set, and only
//!   with status "True".
//! - The signer: an Approved (not Denied) CSR of
//!   `kubernetes.io/kube-apiserver-client-kubelet` or
//!   `kubernetes.io/kubelet-serving` without a certificate gets one signed
//!   by the server's test CA, or a `Failed` condition (reason
//!   `SignerValidationFailure`) when the request does not fit its signer
//!   (organisation `system:nodes`, CN `system:node:…`, the signer's usages;
//!   no SANs for a client certificate, at least one DNS or IP SAN for a
//!   serving one). Validity is rcgen's default, not `expirationSeconds`.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rcgen::{
    CertificateParams, CertificateSigningRequestParams, CertifiedIssuer, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use serde_json::{Value, json};
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::prelude::FromDer;

use super::identity::Identity;
use super::status::ApiError;
use super::store::now;

const USAGES: [&str; 22] = [
    "signing",
    "digital signature",
    "content commitment",
    "key encipherment",
    "key agreement",
    "data encipherment",
    "cert sign",
    "crl sign",
    "encipher only",
    "decipher only",
    "any",
    "server auth",
    "client auth",
    "code signing",
    "email protection",
    "s/mime",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "timestamping",
    "ocsp signing",
    "microsoft sgc",
];
const CLIENT: &str = "kubernetes.io/kube-apiserver-client-kubelet";
const SERVING: &str = "kubernetes.io/kubelet-serving";

/// The server's certificate authority.
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl TestCa {
    pub fn new() -> Self {
        let key = KeyPair::generate().expect("a CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.distinguished_name.push(rcgen::DnType::CommonName, "kube-csr-signer test CA");
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        Self { issuer: CertifiedIssuer::self_signed(params, key).expect("the test CA") }
    }

    pub fn pem(&self) -> String {
        self.issuer.pem()
    }
}

fn invalid(name: &str, field: &str, reason: &str, message: String) -> ApiError {
    ApiError::new(
        422,
        "Invalid",
        format!("CertificateSigningRequest.certificates.k8s.io {name:?} is invalid: {field}: {message}"),
    )
    .with_details(json!({
        "name": name,
        "group": "certificates.k8s.io",
        "kind": "CertificateSigningRequest",
        "causes": [{ "reason": reason, "message": message, "field": field }],
    }))
}

/// What a request asks for.
struct Request {
    cn: String,
    orgs: Vec<String>,
    dns_or_ip: usize,
    other_sans: usize,
}

fn parse(pem: &[u8]) -> Result<Request, String> {
    let (_, block) = x509_parser::pem::parse_x509_pem(pem)
        .map_err(|e| format!("PEM block type must be CERTIFICATE REQUEST ({e})"))?;
    if block.label != "CERTIFICATE REQUEST" {
        return Err(format!("PEM block type must be CERTIFICATE REQUEST, not {}", block.label));
    }
    let (_, csr) = x509_parser::certification_request::X509CertificationRequest::from_der(&block.contents)
        .map_err(|e| format!("cannot parse the certificate request: {e}"))?;
    let subject = &csr.certification_request_info.subject;
    let cn = subject.iter_common_name().next().and_then(|c| c.as_str().ok()).unwrap_or_default().to_owned();
    let orgs = subject.iter_organization().filter_map(|o| o.as_str().ok()).map(str::to_owned).collect();
    let (mut dns_or_ip, mut other_sans) = (0, 0);
    for ext in csr.requested_extensions().into_iter().flatten() {
        if let ParsedExtension::SubjectAlternativeName(san) = ext {
            for name in &san.general_names {
                match name {
                    GeneralName::DNSName(_) | GeneralName::IPAddress(_) => dns_or_ip += 1,
                    _ => other_sans += 1,
                }
            }
        }
    }
    Ok(Request { cn, orgs, dns_or_ip, other_sans })
}

fn request_bytes(obj: &Value) -> Option<Vec<u8>> {
    STANDARD.decode(obj.pointer("/spec/request")?.as_str()?).ok()
}

/// Create: validation and the requester's identity.
pub(crate) fn on_create(body: &mut Value, who: &Identity) -> Result<(), ApiError> {
    let name = body
        .pointer("/metadata/name")
        .or(body.pointer("/metadata/generateName"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let bytes = request_bytes(body)
        .ok_or_else(|| invalid(&name, "spec.request", "FieldValueRequired", "Required value".into()))?;
    parse(&bytes).map_err(|e| invalid(&name, "spec.request", "FieldValueInvalid", format!("Invalid value: {e}")))?;
    let signer = body.pointer("/spec/signerName").and_then(Value::as_str).unwrap_or_default();
    if signer.is_empty() {
        return Err(invalid(&name, "spec.signerName", "FieldValueRequired", "Required value".into()));
    }
    if !signer.contains('/') || signer.starts_with('/') || signer.ends_with('/') {
        return Err(invalid(
            &name,
            "spec.signerName",
            "FieldValueInvalid",
            format!(
                "Invalid value: {signer:?}: must be a fully qualified domain and path of the form 'example.com/signer-name'"
            ),
        ));
    }
    let usages: Vec<&str> = body
        .pointer("/spec/usages")
        .and_then(Value::as_array)
        .map(|u| u.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if usages.is_empty() {
        return Err(invalid(&name, "spec.usages", "FieldValueRequired", "Required value".into()));
    }
    if let Some(bad) = usages.iter().find(|u| !USAGES.contains(u)) {
        return Err(invalid(&name, "spec.usages", "FieldValueNotSupported", format!("Unsupported value: {bad:?}")));
    }
    let spec = &mut body["spec"];
    spec["username"] = json!(who.user);
    spec["uid"] = json!(who.uid);
    spec["groups"] = json!(who.groups);
    if let Some(s) = spec.as_object_mut() {
        s.remove("extra");
    }
    if let Some(o) = body.as_object_mut() {
        o.remove("status");
    }
    Ok(())
}

fn decisions(obj: &Value) -> Vec<(String, String)> {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let kind = c.get("type")?.as_str()?;
            matches!(kind, "Approved" | "Denied")
                .then(|| (kind.to_owned(), c.get("status").and_then(Value::as_str).unwrap_or_default().to_owned()))
        })
        .collect()
}

/// A `/status` write may not change the Approved and Denied conditions.
pub(crate) fn check_status_write(name: &str, old: &Value, new: &Value) -> Result<(), ApiError> {
    if decisions(old) != decisions(new) {
        return Err(invalid(
            name,
            "status.conditions",
            "FieldValueForbidden",
            "Forbidden: updates may not add or remove Approved or Denied conditions; use the approval subresource"
                .into(),
        ));
    }
    Ok(())
}

/// The object an `/approval` write leaves: the body's Approved and Denied
/// conditions on the stored object (other conditions kept).
pub(crate) fn approval(name: &str, old: &Value, body: &Value) -> Result<Value, ApiError> {
    let wanted: Vec<Value> = body
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|c| matches!(c.get("type").and_then(Value::as_str), Some("Approved" | "Denied")))
        .cloned()
        .collect();
    let kinds: Vec<&str> = wanted.iter().filter_map(|c| c["type"].as_str()).collect();
    if kinds.contains(&"Approved") && kinds.contains(&"Denied") {
        return Err(invalid(
            name,
            "status.conditions",
            "FieldValueInvalid",
            "Invalid value: Approved and Denied conditions are mutually exclusive".into(),
        ));
    }
    if let Some(c) = wanted.iter().find(|c| c.get("status").and_then(Value::as_str) != Some("True")) {
        return Err(invalid(
            name,
            "status.conditions[].status",
            "FieldValueNotSupported",
            format!("Unsupported value: {:?}: supported values: \"True\"", c["status"]),
        ));
    }
    for (kind, _) in decisions(old) {
        if !kinds.contains(&kind.as_str()) {
            return Err(invalid(
                name,
                "status.conditions",
                "FieldValueForbidden",
                format!("Forbidden: updates may not remove a condition of type {kind:?}"),
            ));
        }
    }
    let mut new = old.clone();
    let mut conditions: Vec<Value> = old
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|c| !matches!(c.get("type").and_then(Value::as_str), Some("Approved" | "Denied")))
        .cloned()
        .collect();
    for mut c in wanted {
        for field in ["lastUpdateTime", "lastTransitionTime"] {
            if c.get(field).is_none_or(Value::is_null) {
                c[field] = json!(now());
            }
        }
        conditions.push(c);
    }
    if !new.get("status").is_some_and(Value::is_object) {
        new["status"] = json!({});
    }
    new["status"]["conditions"] = Value::Array(conditions);
    Ok(new)
}

/// The status the signer gives an approved kubelet CSR, if it acts.
pub(crate) fn sign(obj: &Value, ca: &TestCa) -> Option<Value> {
    let signer = obj.pointer("/spec/signerName").and_then(Value::as_str)?;
    if signer != CLIENT && signer != SERVING {
        return None;
    }
    let decided = decisions(obj);
    let approved = decided.iter().any(|(k, _)| k == "Approved");
    let denied = decided.iter().any(|(k, _)| k == "Denied");
    let issued = obj.pointer("/status/certificate").is_some_and(|c| c.as_str().is_some_and(|s| !s.is_empty()));
    let failed = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|c| c.iter().any(|c| c["type"] == "Failed"));
    if !approved || denied || issued || failed {
        return None;
    }
    let mut status = obj.get("status").cloned().unwrap_or_else(|| json!({}));
    match issue(obj, signer, ca) {
        Ok(pem) => status["certificate"] = json!(STANDARD.encode(pem)),
        Err(message) => {
            let failed = json!({
                "type": "Failed", "status": "True", "reason": "SignerValidationFailure", "message": message,
                "lastUpdateTime": now(), "lastTransitionTime": now(),
            });
            match status.get_mut("conditions").and_then(Value::as_array_mut) {
                Some(c) => c.push(failed),
                None => status["conditions"] = json!([failed]),
            }
        }
    }
    Some(status)
}

fn issue(obj: &Value, signer: &str, ca: &TestCa) -> Result<String, String> {
    let bytes = request_bytes(obj).ok_or("no request")?;
    let request = parse(&bytes)?;
    let usages: Vec<&str> = obj
        .pointer("/spec/usages")
        .and_then(Value::as_array)
        .map(|u| u.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let (allowed, needed): (&[&str], &str) = if signer == CLIENT {
        (&["digital signature", "key encipherment", "client auth"], "client auth")
    } else {
        (&["digital signature", "key encipherment", "server auth"], "server auth")
    };
    if request.orgs != ["system:nodes"] || !request.cn.starts_with("system:node:") {
        return Err("subject must be O=system:nodes, CN=system:node:<name>".into());
    }
    if !usages.iter().all(|u| allowed.contains(u)) || !usages.contains(&needed) {
        return Err(format!("usages {usages:?} do not fit signer {signer}"));
    }
    match signer {
        CLIENT if request.dns_or_ip + request.other_sans > 0 => {
            return Err("a kubelet client certificate has no subject alternative names".into());
        }
        SERVING if request.dns_or_ip == 0 || request.other_sans > 0 => {
            return Err("a kubelet serving certificate needs DNS or IP names only".into());
        }
        _ => {}
    }
    let pem = String::from_utf8(bytes).map_err(|e| e.to_string())?;
    let mut params = CertificateSigningRequestParams::from_pem(&pem).map_err(|e| e.to_string())?;
    params.params.is_ca = IsCa::NoCa;
    params.params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    params.params.extended_key_usages =
        vec![if signer == CLIENT { ExtendedKeyUsagePurpose::ClientAuth } else { ExtendedKeyUsagePurpose::ServerAuth }];
    let cert = params.signed_by(&ca.issuer).map_err(|e| e.to_string())?;
    Ok(cert.pem())
}
