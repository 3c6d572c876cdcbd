//! `winfleet plan --post github|gitlab` against a local forge API
//! (tests/support/forge.rs): the one plan comment is created, then found
//! (past the first page of 100) and updated in place; a 403 and a 422 are
//! answered plainly with exit 1; the token never appears in the output.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::net::SocketAddr;
use std::process::Command;
use std::sync::Arc;

use axum::http::StatusCode;
use serde_json::json;
use support::GitRepo;
use support::forge::{Forge, TOKEN, start};

const MARKER: &str = "<!-- winfleet-plan -->";

/// A repository whose HEAD~1..HEAD plan has changes.
fn repo(case: &str) -> GitRepo {
    let git = GitRepo::new();
    git.commit_dir(&support::fixture(&format!("plan/{case}/base")), "base");
    git.commit_dir(&support::fixture(&format!("plan/{case}/head")), "head");
    git
}

/// Runs `winfleet plan … --output text --post <forge>` with only `env`
/// (and PATH) in its environment: (exit code, stdout, stderr).
async fn plan(git: &GitRepo, forge: &str, env: Vec<(&'static str, String)>) -> (i32, String, String) {
    let repo = git.path().to_str().unwrap().to_owned();
    let forge = forge.to_owned();
    tokio::task::spawn_blocking(move || {
        let out = Command::new(env!("CARGO_BIN_EXE_winfleet"))
            .args(["plan", "--repo", &repo, "--base", "HEAD~1", "--output", "text", "--post", &forge])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(env)
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    })
    .await
    .unwrap()
}

fn github_env(addr: SocketAddr, event: &std::path::Path) -> Vec<(&'static str, String)> {
    vec![
        ("GITHUB_API_URL", format!("http://{addr}")),
        ("GITHUB_REPOSITORY", "platform/windows-fleet".to_owned()),
        ("GITHUB_EVENT_PATH", event.display().to_string()),
        ("GITHUB_TOKEN", TOKEN.to_owned()),
    ]
}

fn gitlab_env(addr: SocketAddr) -> Vec<(&'static str, String)> {
    vec![
        ("CI_API_V4_URL", format!("http://{addr}/api/v4")),
        ("CI_PROJECT_ID", "42".to_owned()),
        ("CI_MERGE_REQUEST_IID", "7".to_owned()),
        ("GITLAB_TOKEN", TOKEN.to_owned()),
    ]
}

fn pull_request_event(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("event.json");
    std::fs::write(&path, json!({"action": "synchronize", "number": 7, "pull_request": {"number": 7}}).to_string())
        .unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn github_the_comment_is_created_then_found_past_the_first_page_and_updated_in_place() {
    let forge = Arc::new(Forge::default());
    let addr = start(Arc::clone(&forge)).await;
    let dir = tempfile::tempdir().unwrap();
    let env = github_env(addr, &pull_request_event(dir.path()));
    // 120 other comments first: the plan's is found on the second page.
    forge.comments.lock().unwrap().extend((0..120).map(|i| (i, format!("LGTM {i}"))));

    let git = repo("machinesets");
    let (code, out, err) = plan(&git, "github", env.clone()).await;
    assert_eq!(code, 2, "changes: exit 2; stderr: {err}");
    assert!(out.lines().any(|l| l.starts_with("Plan: ")) && !out.contains(MARKER), "stdout keeps --output text: {out}");
    assert!(err.contains("--post: created comment 1120"), "{err}");
    let first = forge.comments.lock().unwrap()[120].1.clone();
    assert!(first.starts_with(MARKER), "the markdown plan is posted: {first}");

    // A new push (its plan, HEAD~1..HEAD, has no changes): the same comment
    // is updated to say so; no second one appears.
    std::fs::write(git.path().join("notes.yaml"), "# a comment only\n").unwrap();
    git.commit_all("another push");
    let (code, _, err) = plan(&git, "github", env).await;
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("--post: updated comment 1120"), "{err}");
    let comments = forge.comments.lock().unwrap();
    assert_ne!(comments[120].1, first, "the comment now shows the new plan");
    assert_eq!(comments.iter().filter(|(_, b)| b.starts_with(MARKER)).count(), 1, "one plan comment");
    assert_eq!(comments.len(), 121);
    let requests = forge.requests.lock().unwrap().clone();
    assert!(
        requests.contains(&"GET /repos/platform/windows-fleet/issues/7/comments?page=2".to_owned()),
        "{requests:?}"
    );
    assert!(requests.contains(&"PATCH /repos/platform/windows-fleet/issues/comments/1120".to_owned()), "{requests:?}");
    assert!(!err.contains(TOKEN), "the token is never printed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gitlab_the_note_is_created_then_updated_with_put() {
    let forge = Arc::new(Forge::default());
    let addr = start(Arc::clone(&forge)).await;
    let git = repo("machinesets");
    let (code, _, err) = plan(&git, "gitlab", gitlab_env(addr)).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--post: created comment 1000"), "{err}");
    let (code, _, err) = plan(&git, "gitlab", gitlab_env(addr)).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--post: updated comment 1000"), "{err}");
    let requests = forge.requests.lock().unwrap().clone();
    assert_eq!(
        requests,
        [
            "GET /api/v4/projects/42/merge_requests/7/notes?page=1",
            "POST /api/v4/projects/42/merge_requests/7/notes",
            "GET /api/v4/projects/42/merge_requests/7/notes?page=1",
            "PUT /api/v4/projects/42/merge_requests/7/notes/1000",
        ]
    );
    assert_eq!(forge.comments.lock().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_403_says_what_to_do_on_a_fork_pull_request_and_a_422_is_answered_plainly_with_exit_1() {
    let forge = Arc::new(Forge::default());
    let addr = start(Arc::clone(&forge)).await;
    let dir = tempfile::tempdir().unwrap();
    let env = github_env(addr, &pull_request_event(dir.path()));
    let git = repo("machinesets");

    *forge.refuse_next_write.lock().unwrap() = Some((
        StatusCode::FORBIDDEN,
        json!({"message": "Resource not accessible by integration", "documentation_url": "https://docs.github.com/rest/issues/comments#create-an-issue-comment", "status": "403"}),
    ));
    let (code, out, err) = plan(&git, "github", env.clone()).await;
    assert_eq!(code, 1, "{err}");
    assert!(!out.is_empty(), "the plan is still printed");
    assert!(
        err.contains(
            "creating the plan comment: GitHub answered 403 Forbidden: Resource not accessible by integration (the token \
             may not write pull request comments: give the workflow `permissions: pull-requests: write`. On a pull \
             request from a fork the token is read-only whatever the workflow asks: keep the plan as an artifact \
             there, or post it from a `workflow_run` or `pull_request_target` job, which has a write token, so run \
             nothing from the fork there but winfleet)"
        ),
        "{err}"
    );

    *forge.refuse_next_write.lock().unwrap() = Some((
        StatusCode::UNPROCESSABLE_ENTITY,
        json!({"message": "Validation Failed", "errors": [{"resource": "IssueComment", "code": "unprocessable", "field": "data",
               "message": "Body is too long (maximum is 65536 characters)"}], "status": "422"}),
    ));
    let (code, _, err) = plan(&git, "github", env.clone()).await;
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(
            "GitHub answered 422 Unprocessable Entity: Validation Failed; Body is too long (maximum is 65536 characters) \
             (the comment was refused as it is: lower --max-bytes if it is too long)"
        ),
        "{err}"
    );

    // A wrong token: 401, said as such; the token is not printed.
    let mut wrong = env.clone();
    wrong.retain(|(k, _)| *k != "GITHUB_TOKEN");
    wrong.push(("GH_TOKEN", "not-the-token".to_owned()));
    let (code, _, err) = plan(&git, "github", wrong).await;
    assert_eq!(code, 1);
    assert!(
        err.contains("GitHub answered 401 Unauthorized: Bad credentials (the token is missing, expired or wrong)"),
        "{err}"
    );
    assert!(!err.contains("not-the-token"), "{err}");
    assert!(forge.comments.lock().unwrap().is_empty(), "nothing was posted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_a_pull_request_or_without_a_token_it_says_what_is_missing() {
    let git = repo("machinesets");
    let env = vec![
        ("GITHUB_REPOSITORY", "o/r".to_owned()),
        ("GITHUB_TOKEN", TOKEN.to_owned()),
        ("GITHUB_REF", "refs/heads/main".to_owned()),
    ];
    let (code, _, err) = plan(&git, "github", env).await;
    assert_eq!(code, 1);
    assert!(err.contains("--post github: this run is not for a pull request"), "{err}");
    let (code, _, err) =
        plan(&git, "gitlab", vec![("CI_API_V4_URL", "https://gitlab.example/api/v4".to_owned())]).await;
    assert_eq!(code, 1);
    assert!(err.contains("--post: the merge request is not set ($CI_MERGE_REQUEST_IID)"), "{err}");
    // GITHUB_REF of a pull request is enough without the event file.
    let forge = Arc::new(Forge::default());
    let addr = start(Arc::clone(&forge)).await;
    let env = vec![
        ("GITHUB_API_URL", format!("http://{addr}/")),
        ("GITHUB_REPOSITORY", "o/r".to_owned()),
        ("GH_TOKEN", TOKEN.to_owned()),
        ("GITHUB_REF", "refs/pull/9/merge".to_owned()),
    ];
    let (code, _, err) = plan(&git, "github", env).await;
    assert_eq!(code, 2, "{err}");
    assert_eq!(forge.requests.lock().unwrap().last().unwrap(), "POST /repos/o/r/issues/9/comments");
}
