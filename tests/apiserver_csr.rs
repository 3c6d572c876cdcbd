//! The in-memory API's CertificateSigningRequests, through a real
//! `kube::Client`: who asked (token, impersonation, anonymous), create
//! validation, the approval subresource's rules, and the emulated kubelet
//! signers issuing certificates that chain to the server's CA.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use base64::Engine;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use rcgen::{CertificateParams, DnType, KeyPair, SanType};
use serde_json::{Value, json};
use support::apiserver::ApiServer;
use x509_parser::prelude::FromDer;

const CLIENT: &str = "kubernetes.io/kube-apiserver-client-kubelet";
const SERVING: &str = "kubernetes.io/kubelet-serving";

fn request(cn: &str, org: &str, sans: &[&str]) -> String {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, cn);
    params.distinguished_name.push(DnType::OrganizationName, org);
    params.subject_alt_names = sans
        .iter()
        .map(|s| match s.parse() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName((*s).try_into().unwrap()),
        })
        .collect();
    params.serialize_request(&key).unwrap().pem().unwrap()
}

fn csr(name: &str, pem: &str, signer: &str, usages: &[&str]) -> CertificateSigningRequest {
    serde_json::from_value(json!({
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": { "name": name },
        "spec": {
            "request": base64::engine::general_purpose::STANDARD.encode(pem),
            "signerName": signer,
            "usages": usages,
            "username": "someone-else",
            "groups": ["system:masters"],
        },
    }))
    .unwrap()
}

fn approve_patch(kind: &str) -> Value {
    json!({ "status": { "conditions": [{ "type": kind, "status": "True", "reason": "Test", "message": "by the test" }] } })
}

async fn client_with(server: &ApiServer, token: Option<&str>, impersonate: Option<(&str, &[&str])>) -> kube::Client {
    let served = server.serve().await;
    let kubeconfig = kube::config::Kubeconfig::read_from(&served.kubeconfig).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.unwrap();
    if let Some(token) = token {
        config.auth_info.token = Some(token.to_owned().into());
    }
    if let Some((user, groups)) = impersonate {
        config.auth_info.impersonate = Some(user.to_owned());
        config.auth_info.impersonate_groups = Some(groups.iter().map(|g| (*g).to_owned()).collect());
    }
    std::mem::forget(served);
    kube::Client::try_from(config).unwrap()
}

#[tokio::test]
async fn a_kubelet_client_csr_records_its_requester_and_is_signed_once_approved() {
    let server = ApiServer::new();
    server.add_token("abcdef.0123456789abcdef", "system:bootstrap:abcdef", &["system:bootstrappers"]);
    let client = client_with(&server, Some("abcdef.0123456789abcdef"), None).await;
    let api: Api<CertificateSigningRequest> = Api::all(client.clone());
    let pem = request("system:node:win-1", "system:nodes", &[]);
    let created = api
        .create(&PostParams::default(), &csr("node-csr-1", &pem, CLIENT, &["digital signature", "client auth"]))
        .await
        .unwrap();
    assert_eq!(created.spec.username.as_deref(), Some("system:bootstrap:abcdef"), "the server sets the requester");
    let groups = created.spec.groups.unwrap();
    assert!(
        groups.contains(&"system:bootstrappers".to_owned()) && groups.contains(&"system:authenticated".to_owned()),
        "{groups:?}"
    );
    assert!(created.status.as_ref().and_then(|s| s.certificate.as_ref()).is_none());

    let admin = server.client();
    let admin_api: Api<CertificateSigningRequest> = Api::all(admin);
    admin_api
        .patch_approval("node-csr-1", &PatchParams::default(), &Patch::Merge(&approve_patch("Approved")))
        .await
        .unwrap();
    let issued = api.get("node-csr-1").await.unwrap();
    let certificate = issued.status.unwrap().certificate.expect("signed on approval").0;
    let (_, block) = x509_parser::pem::parse_x509_pem(&certificate).unwrap();
    let (_, cert) = x509_parser::certificate::X509Certificate::from_der(&block.contents).unwrap();
    let cn = cert.subject().iter_common_name().next().unwrap().as_str().unwrap().to_owned();
    assert_eq!(cn, "system:node:win-1");
    let (_, ca_block) = x509_parser::pem::parse_x509_pem(server.ca_pem().as_bytes()).unwrap();
    let (_, ca) = x509_parser::certificate::X509Certificate::from_der(&ca_block.contents).unwrap();
    assert_eq!(cert.issuer(), ca.subject(), "chains to the server's CA");
    cert.verify_signature(Some(ca.public_key())).expect("signed by the CA");
}

#[tokio::test]
async fn identity_comes_from_impersonation_or_is_anonymous_and_unknown_tokens_are_refused() {
    let server = ApiServer::new();
    let node = client_with(&server, None, Some(("system:node:win-1", &["system:nodes"]))).await;
    let api: Api<CertificateSigningRequest> = Api::all(node);
    let pem = request("system:node:win-1", "system:nodes", &["win-1", "10.0.0.1"]);
    let created = api
        .create(&PostParams::default(), &csr("serving", &pem, SERVING, &["digital signature", "server auth"]))
        .await
        .unwrap();
    assert_eq!(created.spec.username.as_deref(), Some("system:node:win-1"));
    assert_eq!(created.spec.groups.unwrap(), vec!["system:nodes".to_owned(), "system:authenticated".to_owned()]);

    let anonymous: Api<CertificateSigningRequest> = Api::all(server.client());
    let created = anonymous
        .create(&PostParams::default(), &csr("anon", &pem, SERVING, &["digital signature", "server auth"]))
        .await
        .unwrap();
    assert_eq!(created.spec.username.as_deref(), Some("system:anonymous"));

    let stranger: Api<CertificateSigningRequest> = Api::all(client_with(&server, Some("nope"), None).await);
    let e = stranger.list(&ListParams::default()).await.unwrap_err();
    assert!(matches!(e, kube::Error::Api(s) if s.code == 401), "an unknown token is refused");
}

#[tokio::test]
async fn create_validates_like_kube_apiserver() {
    let server = ApiServer::new();
    let api: Api<CertificateSigningRequest> = Api::all(server.client());
    let pem = request("system:node:win-1", "system:nodes", &[]);
    let cases = [
        (
            csr("bad-pem", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", CLIENT, &["client auth"]),
            "spec.request",
        ),
        (csr("no-signer", &pem, "", &["client auth"]), "spec.signerName"),
        (csr("bad-signer", &pem, "kubelet", &["client auth"]), "spec.signerName"),
        (csr("no-usages", &pem, CLIENT, &[]), "spec.usages"),
        (csr("odd-usage", &pem, CLIENT, &["client auth", "teleport"]), "spec.usages"),
    ];
    for (object, field) in cases {
        let name = object.metadata.name.clone().unwrap();
        match api.create(&PostParams::default(), &object).await {
            Err(kube::Error::Api(s)) => {
                assert_eq!(s.code, 422, "{name}");
                assert!(s.message.contains(field), "{name}: {}", s.message);
            }
            other => panic!("{name}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn decisions_are_made_only_through_the_approval_subresource_and_never_undone() {
    let server = ApiServer::new();
    let api: Api<CertificateSigningRequest> = Api::all(server.client());
    let pem = request("system:node:win-1", "system:nodes", &[]);
    api.create(&PostParams::default(), &csr("c", &pem, CLIENT, &["digital signature", "client auth"])).await.unwrap();
    let code = |r: Result<CertificateSigningRequest, kube::Error>| match r {
        Err(kube::Error::Api(s)) => s.code,
        Ok(_) => 200,
        Err(e) => panic!("{e}"),
    };
    let pp = PatchParams::default();
    assert_eq!(
        code(api.patch_status("c", &pp, &Patch::Merge(&approve_patch("Approved"))).await),
        422,
        "not through /status"
    );
    let both = json!({ "status": { "conditions": [
        { "type": "Approved", "status": "True" }, { "type": "Denied", "status": "True" }] } });
    assert_eq!(code(api.patch_approval("c", &pp, &Patch::Merge(&both)).await), 422, "never both");
    let not_true = json!({ "status": { "conditions": [{ "type": "Approved", "status": "False" }] } });
    assert_eq!(code(api.patch_approval("c", &pp, &Patch::Merge(&not_true)).await), 422);
    assert_eq!(code(api.patch_approval("c", &pp, &Patch::Merge(&approve_patch("Denied"))).await), 200);
    assert_eq!(
        code(api.patch_approval("c", &pp, &Patch::Merge(&json!({ "status": { "conditions": [] } }))).await),
        422,
        "never undone"
    );
    let denied = api.get("c").await.unwrap();
    assert!(denied.status.unwrap().certificate.is_none(), "a denied CSR gets no certificate");
}

#[tokio::test]
async fn a_request_that_does_not_fit_its_signer_fails_instead_of_being_signed() {
    let server = ApiServer::new();
    let api: Api<CertificateSigningRequest> = Api::all(server.client());
    let with_sans = request("system:node:win-1", "system:nodes", &["win-1"]);
    api.create(&PostParams::default(), &csr("misfit", &with_sans, CLIENT, &["digital signature", "client auth"]))
        .await
        .unwrap();
    api.patch_approval("misfit", &PatchParams::default(), &Patch::Merge(&approve_patch("Approved"))).await.unwrap();
    let status = api.get("misfit").await.unwrap().status.unwrap();
    assert!(status.certificate.is_none());
    let conditions = status.conditions.unwrap();
    assert!(
        conditions.iter().any(|c| c.type_ == "Failed" && c.reason.as_deref() == Some("SignerValidationFailure")),
        "{conditions:?}"
    );
}

#[tokio::test]
async fn csrs_are_selected_by_signer_and_the_openshift_objects_are_served() {
    let server = ApiServer::new();
    let api: Api<CertificateSigningRequest> = Api::all(server.client());
    let pem = request("system:node:win-1", "system:nodes", &["win-1"]);
    api.create(&PostParams::default(), &csr("a", &pem, SERVING, &["digital signature", "server auth"])).await.unwrap();
    api.create(&PostParams::default(), &csr("b", &pem, "example.com/other", &["digital signature"])).await.unwrap();
    let serving = api.list(&ListParams::default().fields(&format!("spec.signerName={SERVING}"))).await.unwrap();
    assert_eq!(serving.items.len(), 1);
    use support::apiserver::fixtures;
    server.seed(fixtures::bootstrap_secret("tok", "CA"));
    server.seed(fixtures::infrastructure("https://api-int.x:6443"));
    server.seed(fixtures::network("172.30.0.0/16"));
    server.seed(fixtures::controller_config("KCA"));
    let material = winfleet::cluster::material::read(&server.client(), true).await.unwrap();
    assert_eq!(material.api_server_url, "https://api-int.x:6443");
    assert_eq!(material.cluster_dns, "172.30.0.10");
    assert_eq!(material.kubelet_ca, "KCA");
    assert_eq!(material.bootstrap_token, "tok");
}
