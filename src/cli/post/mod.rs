//! `winfleet plan --post github|gitlab`: creates or updates the one comment
//! on the pull (merge) request that starts with the plan's marker
//! (`<!-- winfleet-plan -->`), through the forge's REST API. Where to post
//! and the token come from the CI's standard environment ([`Target`]); the
//! token is sent in a header only, never printed.

mod forge;
mod http;

use anyhow::Context;
use winfleet::plan::markdown::MARKER;

pub use forge::Target;

/// Where the plan comment goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Forge {
    /// A GitHub pull request (GitHub Actions' environment).
    Github,
    /// A GitLab merge request (GitLab CI's environment).
    Gitlab,
}

impl Forge {
    /// The forge's name for messages.
    pub fn name(self) -> &'static str {
        match self {
            Forge::Github => "GitHub",
            Forge::Gitlab => "GitLab",
        }
    }
}

/// What posting did.
#[derive(Debug, PartialEq, Eq)]
pub enum Posted {
    /// A new comment, with its id.
    Created(u64),
    /// The existing comment, with its id.
    Updated(u64),
}

impl std::fmt::Display for Posted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Posted::Created(id) => write!(f, "created comment {id}"),
            Posted::Updated(id) => write!(f, "updated comment {id}"),
        }
    }
}

/// Posts `body` (the markdown plan, which starts with the marker) as the
/// one plan comment of the request `forge` and the environment name.
pub fn post(forge: Forge, body: &str, env: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<Posted> {
    let target = Target::from_env(forge, env)?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let client = http::Client::new(&target)?;
        let existing = find(&client, &target).await?;
        let posted = match existing {
            Some(id) => {
                client.write(&target.update(id), "updating the plan comment", body).await?;
                Posted::Updated(id)
            }
            None => {
                let answer = client.write(&target.create(), "creating the plan comment", body).await?;
                Posted::Created(answer["id"].as_u64().context("the created comment has no id")?)
            }
        };
        anyhow::Ok(posted)
    })
}

/// The id of the first comment that starts with the marker, page by page
/// (100 a page; at most 100 pages).
async fn find(client: &http::Client, target: &Target) -> anyhow::Result<Option<u64>> {
    for page in 1..=100 {
        let comments = client.read(&target.list(page), "listing the comments").await?;
        let comments = comments.as_array().context("the comments are not a list")?;
        if let Some(id) = plan_comment(comments) {
            return Ok(Some(id));
        }
        if comments.len() < forge::PER_PAGE {
            break;
        }
    }
    Ok(None)
}

/// The id of the first comment of a page that starts with the marker: the
/// one plan comment, which posting updates. Pure.
fn plan_comment(comments: &[serde_json::Value]) -> Option<u64> {
    let ours = comments.iter().find(|c| c["body"].as_str().is_some_and(|b| b.trim_start().starts_with(MARKER)));
    ours.and_then(|c| c["id"].as_u64())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_plan_comment_is_the_first_that_starts_with_the_marker() {
        let page = [
            json!({"id": 1, "body": "LGTM"}),
            json!({"id": 2, "body": format!("quoting {MARKER}")}),
            json!({"id": 3, "body": format!("\n{MARKER}\n### winfleet plan")}),
            json!({"id": 4, "body": format!("{MARKER}\nan older one")}),
        ];
        assert_eq!(plan_comment(&page), Some(3));
        assert_eq!(plan_comment(&page[..2]), None);
        assert_eq!(plan_comment(&[json!({"body": MARKER})]), None, "a comment without an id is not ours to update");
    }
}
