//! The two forges' endpoints and where their CI says the request is.
//!
//! GitHub (REST API, "Issue comments": a pull request's conversation
//! comments are its issue's): list `GET /repos/{repo}/issues/{n}/comments`,
//! create `POST` there, update `PATCH /repos/{repo}/issues/comments/{id}`.
//! GitLab (REST API v4, "Notes"): list `GET
//! /projects/{id}/merge_requests/{iid}/notes`, create `POST` there, update
//! `PUT …/notes/{note}`.

use anyhow::{Context, bail};
use http::Method;

use super::Forge;

/// Comments asked for per page.
pub const PER_PAGE: usize = 100;

/// One API call: method and URL.
#[derive(Debug)]
pub struct Call {
    /// The HTTP method.
    pub method: Method,
    /// The whole URL.
    pub url: String,
}

/// A pull or merge request to comment on, and how to authenticate.
#[derive(Debug)]
pub struct Target {
    /// Which forge.
    pub forge: Forge,
    /// The API's base URL, without a trailing slash.
    api: String,
    /// GitHub: `owner/repo`; GitLab: the project id (URL-encoded).
    project: String,
    /// The pull request number, or the merge request IID.
    number: u64,
    /// The token (sent in a header only).
    pub token: String,
}

fn var(env: &dyn Fn(&str) -> Option<String>, names: &[&str], what: &str) -> anyhow::Result<String> {
    names.iter().find_map(|n| env(n).filter(|v| !v.trim().is_empty())).map(|v| v.trim().to_owned()).with_context(|| {
        format!(
            "--post: {what} is not set ({})",
            names.iter().map(|n| format!("${n}")).collect::<Vec<_>>().join(" or ")
        )
    })
}

/// The pull request number of a GitHub Actions run: the event's
/// `pull_request.number` (or `number`), else `refs/pull/N/…` in GITHUB_REF.
fn github_number(env: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<u64> {
    if let Some(path) = env("WINFLEET_PULL_REQUEST") {
        return path.trim().parse().with_context(|| format!("--post: $WINFLEET_PULL_REQUEST {path:?} is not a number"));
    }
    if let Some(path) = env("GITHUB_EVENT_PATH") {
        let text =
            std::fs::read_to_string(&path).with_context(|| format!("--post: reading $GITHUB_EVENT_PATH {path}"))?;
        let event: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("--post: $GITHUB_EVENT_PATH {path} is not JSON"))?;
        if let Some(n) = event["pull_request"]["number"].as_u64().or_else(|| event["number"].as_u64()) {
            return Ok(n);
        }
    }
    if let Some(n) = env("GITHUB_REF")
        .and_then(|r| r.strip_prefix("refs/pull/").and_then(|r| r.split('/').next()).and_then(|n| n.parse().ok()))
    {
        return Ok(n);
    }
    bail!(
        "--post github: this run is not for a pull request (no pull_request in $GITHUB_EVENT_PATH, no refs/pull/N in \
         $GITHUB_REF); run it on `pull_request` events, or set $WINFLEET_PULL_REQUEST"
    )
}

impl Target {
    /// Reads the request from the CI's environment: GitHub Actions'
    /// `GITHUB_API_URL`, `GITHUB_REPOSITORY`, the event (`GITHUB_EVENT_PATH`)
    /// and a token in `GITHUB_TOKEN` or `GH_TOKEN`; GitLab CI's
    /// `CI_API_V4_URL`, `CI_PROJECT_ID`, `CI_MERGE_REQUEST_IID` and a token
    /// with the api scope in `GITLAB_TOKEN` or `GITLAB_API_TOKEN`.
    pub fn from_env(forge: Forge, env: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<Self> {
        Ok(match forge {
            Forge::Github => Target {
                forge,
                api: env("GITHUB_API_URL").unwrap_or_else(|| "https://api.github.com".to_owned()),
                project: var(env, &["GITHUB_REPOSITORY"], "the repository")?,
                number: github_number(env)?,
                token: var(env, &["GITHUB_TOKEN", "GH_TOKEN"], "the token")?,
            },
            Forge::Gitlab => {
                let iid = var(env, &["CI_MERGE_REQUEST_IID"], "the merge request")?;
                Target {
                    forge,
                    api: var(env, &["CI_API_V4_URL"], "the API URL")?,
                    project: url::form_urlencoded::byte_serialize(
                        var(env, &["CI_PROJECT_ID"], "the project")?.as_bytes(),
                    )
                    .collect(),
                    number: iid
                        .parse()
                        .with_context(|| format!("--post: $CI_MERGE_REQUEST_IID {iid:?} is not a number"))?,
                    token: var(env, &["GITLAB_TOKEN", "GITLAB_API_TOKEN"], "the token")?,
                }
            }
        }
        .trimmed())
    }

    fn trimmed(mut self) -> Self {
        self.api = self.api.trim_end_matches('/').to_owned();
        self
    }

    /// The API's base URL.
    pub fn api(&self) -> &str {
        &self.api
    }

    fn comments(&self) -> String {
        match self.forge {
            Forge::Github => format!("{}/repos/{}/issues/{}/comments", self.api, self.project, self.number),
            Forge::Gitlab => format!("{}/projects/{}/merge_requests/{}/notes", self.api, self.project, self.number),
        }
    }

    /// Lists page `page` of the comments.
    pub fn list(&self, page: usize) -> Call {
        Call { method: Method::GET, url: format!("{}?per_page={PER_PAGE}&page={page}", self.comments()) }
    }

    /// Creates a comment.
    pub fn create(&self) -> Call {
        Call { method: Method::POST, url: self.comments() }
    }

    /// Updates comment `id`.
    pub fn update(&self, id: u64) -> Call {
        match self.forge {
            Forge::Github => {
                Call { method: Method::PATCH, url: format!("{}/repos/{}/issues/comments/{id}", self.api, self.project) }
            }
            Forge::Gitlab => Call { method: Method::PUT, url: format!("{}/{id}", self.comments()) },
        }
    }
}
