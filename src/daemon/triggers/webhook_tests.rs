//! Tests of the webhook verification.

#![allow(clippy::unwrap_used)]

use super::*;
use axum::http::HeaderValue;

const SECRET: &[u8] = b"s3cret-webhook-key";

fn config() -> WebhookConfig {
    WebhookConfig::new(SECRET.to_vec(), "main")
}

fn sign(secret: &[u8], body: &[u8]) -> String {
    let tag = <Hmac<Sha256> as KeyInit>::new_from_slice(secret).unwrap().chain_update(body).finalize().into_bytes();
    let hex: String = tag.iter().map(|byte| format!("{byte:02x}")).collect();
    format!("sha256={hex}")
}

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.insert(*name, HeaderValue::from_str(value).unwrap());
    }
    map
}

fn github(event: &str, body: &[u8]) -> Verdict {
    let signature = sign(SECRET, body);
    verify(&config(), &headers(&[(GITHUB_SIGNATURE, &signature), (GITHUB_EVENT, event)]), body)
}

fn gitlab(token: &str, event: &str, body: &[u8]) -> Verdict {
    verify(&config(), &headers(&[(GITLAB_TOKEN, token), (GITLAB_EVENT, event)]), body)
}

fn generic(body: &[u8]) -> Verdict {
    verify(&config(), &headers(&[(GENERIC_SIGNATURE, &sign(SECRET, body))]), body)
}

const MAIN_PUSH: &[u8] = br#"{"ref":"refs/heads/main","after":"0123"}"#;

#[test]
fn a_signed_github_push_to_the_tracked_branch_triggers() {
    assert_eq!(github("push", MAIN_PUSH), Verdict::Trigger);
}

#[test]
fn a_github_signature_made_with_another_secret_is_unauthorized() {
    let signature = sign(b"not-the-secret", MAIN_PUSH);
    let verdict = verify(&config(), &headers(&[(GITHUB_SIGNATURE, &signature), (GITHUB_EVENT, "push")]), MAIN_PUSH);
    assert_eq!(verdict, Verdict::Unauthorized);
}

#[test]
fn a_github_signature_over_another_body_is_unauthorized() {
    let signature = sign(SECRET, br#"{"ref":"refs/heads/other"}"#);
    let verdict = verify(&config(), &headers(&[(GITHUB_SIGNATURE, &signature), (GITHUB_EVENT, "push")]), MAIN_PUSH);
    assert_eq!(verdict, Verdict::Unauthorized);
}

#[test]
fn malformed_github_signatures_are_unauthorized() {
    let good = sign(SECRET, MAIN_PUSH);
    let hex = good.strip_prefix("sha256=").unwrap();
    for signature in [hex.to_owned(), format!("sha1={hex}"), format!("sha256={}", &hex[..62]), "sha256=zz".into()] {
        let verdict = verify(&config(), &headers(&[(GITHUB_SIGNATURE, &signature), (GITHUB_EVENT, "push")]), MAIN_PUSH);
        assert_eq!(verdict, Verdict::Unauthorized, "{signature}");
    }
}

#[test]
fn a_request_without_an_authentication_header_is_unauthorized() {
    assert_eq!(verify(&config(), &headers(&[(GITHUB_EVENT, "push")]), MAIN_PUSH), Verdict::Unauthorized);
    assert_eq!(verify(&config(), &HeaderMap::new(), b""), Verdict::Unauthorized);
}

#[test]
fn a_github_push_to_another_branch_is_ignored() {
    let verdict = github("push", br#"{"ref":"refs/heads/feature"}"#);
    assert!(matches!(&verdict, Verdict::Ignored(reason) if reason.contains("refs/heads/feature")), "{verdict:?}");
    assert!(matches!(github("push", br#"{"ref":"refs/tags/main"}"#), Verdict::Ignored(_)));
}

#[test]
fn a_github_ping_is_answered_without_a_round() {
    assert_eq!(github("ping", br#"{"zen":"Keep it logically awesome."}"#), Verdict::Ping);
}

#[test]
fn other_github_events_are_ignored() {
    let verdict = github("pull_request", MAIN_PUSH);
    assert!(matches!(&verdict, Verdict::Ignored(reason) if reason.contains("pull_request")), "{verdict:?}");
}

#[test]
fn a_signed_github_request_without_an_event_is_a_bad_request() {
    let verdict = verify(&config(), &headers(&[(GITHUB_SIGNATURE, &sign(SECRET, MAIN_PUSH))]), MAIN_PUSH);
    assert!(matches!(verdict, Verdict::BadRequest(_)), "{verdict:?}");
}

#[test]
fn a_signed_github_push_with_malformed_json_is_a_bad_request() {
    // GitHub's other content type, application/x-www-form-urlencoded.
    let verdict = github("push", b"payload=%7B%22ref%22%7D");
    assert!(matches!(&verdict, Verdict::BadRequest(reason) if reason.contains("application/json")), "{verdict:?}");
    assert!(matches!(github("push", br#"{"ref":7}"#), Verdict::BadRequest(_)));
    assert!(matches!(github("push", br#"{"after":"0123"}"#), Verdict::BadRequest(_)));
}

#[test]
fn a_gitlab_push_with_the_right_token_triggers() {
    let token = std::str::from_utf8(SECRET).unwrap();
    assert_eq!(gitlab(token, "Push Hook", MAIN_PUSH), Verdict::Trigger);
    let other = br#"{"ref":"refs/heads/dev"}"#;
    assert!(matches!(gitlab(token, "Push Hook", other), Verdict::Ignored(_)));
}

#[test]
fn a_gitlab_request_with_a_wrong_token_is_unauthorized() {
    assert_eq!(gitlab("s3cret-webhook-kez", "Push Hook", MAIN_PUSH), Verdict::Unauthorized);
    assert_eq!(gitlab("s3cret", "Push Hook", MAIN_PUSH), Verdict::Unauthorized);
    assert_eq!(gitlab("", "Push Hook", MAIN_PUSH), Verdict::Unauthorized);
}

#[test]
fn a_gitlab_system_hook_triggers_only_for_pushes() {
    let token = std::str::from_utf8(SECRET).unwrap();
    let push = br#"{"event_name":"push","ref":"refs/heads/main"}"#;
    assert_eq!(gitlab(token, "System Hook", push), Verdict::Trigger);
    let project = br#"{"event_name":"project_create","name":"fleet"}"#;
    assert!(matches!(gitlab(token, "System Hook", project), Verdict::Ignored(_)));
    assert!(matches!(gitlab(token, "Tag Push Hook", MAIN_PUSH), Verdict::Ignored(_)));
}

#[test]
fn a_generic_signed_request_without_a_ref_triggers() {
    assert_eq!(generic(b""), Verdict::Trigger);
    assert_eq!(generic(br#"{"reason":"manual"}"#), Verdict::Trigger);
}

#[test]
fn a_generic_request_naming_a_branch_must_name_the_tracked_one() {
    assert_eq!(generic(br#"{"ref":"refs/heads/main"}"#), Verdict::Trigger);
    assert_eq!(generic(br#"{"branch":"main"}"#), Verdict::Trigger);
    assert!(matches!(generic(br#"{"ref":"refs/heads/dev"}"#), Verdict::Ignored(_)));
    assert!(matches!(generic(br#"{"branch":"dev"}"#), Verdict::Ignored(_)));
}

#[test]
fn a_generic_request_with_malformed_json_is_a_bad_request() {
    assert!(matches!(generic(b"{\"ref\":"), Verdict::BadRequest(_)));
}

#[test]
fn a_generic_request_with_a_bad_signature_is_unauthorized_before_its_body_is_read() {
    let body = b"{not json";
    let verdict = verify(&config(), &headers(&[(GENERIC_SIGNATURE, &sign(b"other", body))]), body);
    assert_eq!(verdict, Verdict::Unauthorized);
}

#[test]
fn an_empty_secret_authenticates_nothing() {
    let config = WebhookConfig::new(Vec::new(), "main");
    let signature = sign(b"", MAIN_PUSH);
    let verdict = verify(&config, &headers(&[(GITHUB_SIGNATURE, &signature), (GITHUB_EVENT, "push")]), MAIN_PUSH);
    assert_eq!(verdict, Verdict::Unauthorized);
    let empty_token = headers(&[(GITLAB_TOKEN, ""), (GITLAB_EVENT, "Push Hook")]);
    assert_eq!(verify(&config, &empty_token, MAIN_PUSH), Verdict::Unauthorized);
}

#[test]
fn an_empty_secret_file_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("secret");
    std::fs::write(&path, " \n\n").unwrap();
    let error = WebhookConfig::from_file(&path, "main").unwrap_err();
    assert!(matches!(error, WebhookError::Empty { .. }), "{error}");
    let missing = WebhookConfig::from_file(&dir.path().join("absent"), "main").unwrap_err();
    assert!(matches!(missing, WebhookError::Read { .. }), "{missing}");
}

#[test]
fn the_secret_file_loses_its_trailing_newline() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("secret");
    std::fs::write(&path, [SECRET, b"\r\n"].concat()).unwrap();
    let config = WebhookConfig::from_file(&path, "refs/heads/main").unwrap();
    assert_eq!(config.branch, "main");
    let signature = sign(SECRET, MAIN_PUSH);
    let verdict = verify(&config, &headers(&[(GITHUB_SIGNATURE, &signature), (GITHUB_EVENT, "push")]), MAIN_PUSH);
    assert_eq!(verdict, Verdict::Trigger);
}

#[test]
fn debug_output_redacts_the_secret() {
    let shown = format!("{:?}", config());
    assert!(!shown.contains("s3cret"), "{shown}");
    assert!(shown.contains("<redacted>") && shown.contains("main"), "{shown}");
}
