//! The forge's REST API over HTTPS (or plain HTTP for a local test
//! server): JSON in and out, the token in the forge's header, and refusals
//! explained.

use std::time::Duration;

use anyhow::{Context, bail};
use axum::body::Bytes;
use http::{HeaderValue, Request, StatusCode, header};
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};

use super::Forge;
use super::forge::{Call, Target};
use crate::cli::http::{self as client, Failure};

/// How long one request may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// A client for one forge.
pub struct Client {
    http: client::Client<HttpsConnector<HttpConnector>>,
    auth: (header::HeaderName, HeaderValue),
    forge: Forge,
}

impl Client {
    /// A client that trusts the system's root certificates.
    pub fn new(target: &Target) -> anyhow::Result<Self> {
        let http = client::Client::https().context("--post: reading the system's root certificates")?;
        let (name, value) = match target.forge {
            Forge::Github => (header::AUTHORIZATION, format!("Bearer {}", target.token)),
            Forge::Gitlab => (header::HeaderName::from_static("private-token"), target.token.clone()),
        };
        let mut value = HeaderValue::from_str(&value).context("--post: the token is not a valid header value")?;
        value.set_sensitive(true);
        if !(target.api().starts_with("https://") || target.api().starts_with("http://")) {
            bail!("--post: the API URL {:?} is not an http(s):// URL", target.api());
        }
        Ok(Self { http, auth: (name, value), forge: target.forge })
    }

    /// A GET; the answer's JSON.
    pub async fn read(&self, call: &Call, what: &str) -> anyhow::Result<Value> {
        self.send(call, what, None).await
    }

    /// A POST, PATCH or PUT of `{"body": body}`; the answer's JSON.
    pub async fn write(&self, call: &Call, what: &str, body: &str) -> anyhow::Result<Value> {
        self.send(call, what, Some(json!({ "body": body }).to_string())).await
    }

    async fn send(&self, call: &Call, what: &str, body: Option<String>) -> anyhow::Result<Value> {
        let request = Request::builder()
            .method(call.method.clone())
            .uri(&call.url)
            .header(self.auth.0.clone(), self.auth.1.clone())
            .header(header::ACCEPT, "application/vnd.github+json, application/json")
            .header("X-GitHub-Api-Version", "2022-11-28")
            .header(header::USER_AGENT, concat!("winfleet/", env!("CARGO_PKG_VERSION")))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .with_context(|| format!("{what}: building the request to {}", call.url))?;
        let (status, bytes) = self.http.send(request, TIMEOUT).await.map_err(|failure| match failure {
            Failure::Send(e) => anyhow::Error::new(e).context(format!("{what}: {} {}", call.method, call.url)),
            Failure::Read(e) => anyhow::Error::new(e).context(format!("{what}: reading the answer")),
            Failure::Timeout(limit) => {
                anyhow::anyhow!("{what}: no answer from {} within {} s", self.forge.name(), limit.as_secs())
            }
        })?;
        let json: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if !status.is_success() {
            bail!("{what}: {}", refusal(self.forge, status, &json, &bytes));
        }
        Ok(json)
    }
}

/// Why a forge refused, in its own words (`message`, GitHub's
/// `errors[].message`) and what usually causes it.
pub fn refusal(forge: Forge, status: StatusCode, json: &Value, bytes: &[u8]) -> String {
    let mut said: Vec<String> = Vec::new();
    match &json["message"] {
        Value::String(m) => said.push(m.clone()),
        Value::Null => {}
        other => said.push(other.to_string()),
    }
    for error in json["errors"].as_array().into_iter().flatten() {
        if let Some(m) = error["message"].as_str().or_else(|| error.as_str()) {
            said.push(m.to_owned());
        }
    }
    if said.is_empty() && !bytes.is_empty() {
        said.push(String::from_utf8_lossy(&bytes[..bytes.len().min(300)]).trim().to_owned());
    }
    let said = if said.is_empty() { String::new() } else { format!(": {}", said.join("; ")) };
    let hint = match status {
        StatusCode::UNAUTHORIZED => " (the token is missing, expired or wrong)",
        StatusCode::FORBIDDEN => match forge {
            Forge::Github => {
                " (the token may not write pull request comments: give the workflow `permissions: pull-requests: write`. \
                 On a pull request from a fork the token is read-only whatever the workflow asks: keep the plan as an \
                 artifact there, or post it from a `workflow_run` or `pull_request_target` job, which has a write \
                 token, so run nothing from the fork there but winfleet)"
            }
            Forge::Gitlab => {
                " (the token may not write merge request notes: it needs the api scope and at least the Reporter role)"
            }
        },
        StatusCode::NOT_FOUND => " (no such repository or request, or the token cannot see it)",
        StatusCode::UNPROCESSABLE_ENTITY | StatusCode::BAD_REQUEST => {
            " (the comment was refused as it is: lower --max-bytes if it is too long)"
        }
        _ => "",
    };
    format!("{} answered {status}{said}{hint}", forge.name())
}
