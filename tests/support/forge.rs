//! A local GitHub and GitLab REST API for `winfleet plan --post`: the
//! endpoints it uses, with the request and response shapes of GitHub's
//! "Issue comments" and GitLab's "Notes" documentation (ids, bodies, 201 on
//! create, 200 on update, `per_page`/`page` pagination), the token checked
//! as each forge checks it, and a refusal to answer the next write with (a
//! 403 or 422 in the forge's own error shape).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::routing::{get, patch, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

pub const TOKEN: &str = "forge-test-token-s3cr3t";

#[derive(Default)]
pub struct Forge {
    /// Every comment: (id, body), in creation order.
    pub comments: Mutex<Vec<(u64, String)>>,
    /// Every request: method and path with its query.
    pub requests: Mutex<Vec<String>>,
    /// Answer the next write with this status and body.
    pub refuse_next_write: Mutex<Option<(StatusCode, Value)>>,
}

type Shared = Arc<Forge>;

#[derive(Deserialize)]
struct Page {
    per_page: Option<usize>,
    page: Option<usize>,
}

fn authorized(headers: &HeaderMap, github: bool) -> bool {
    let got = if github {
        headers.get("authorization").and_then(|v| v.to_str().ok()).map(|v| v == format!("Bearer {TOKEN}"))
    } else {
        headers.get("private-token").and_then(|v| v.to_str().ok()).map(|v| v == TOKEN)
    };
    got.unwrap_or(false)
}

fn unauthorized(github: bool) -> (StatusCode, Json<Value>) {
    let body = if github {
        json!({"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"})
    } else {
        json!({"message": "401 Unauthorized"})
    };
    (StatusCode::UNAUTHORIZED, Json(body))
}

fn comment(id: u64, body: &str, github: bool) -> Value {
    if github {
        json!({"id": id, "node_id": format!("IC_{id}"), "body": body, "user": {"login": "github-actions[bot]"},
               "html_url": format!("https://github.example/o/r/pull/7#issuecomment-{id}")})
    } else {
        json!({"id": id, "body": body, "system": false, "noteable_type": "MergeRequest", "author": {"username": "bot"}})
    }
}

async fn list(forge: &Forge, headers: &HeaderMap, page: Page, github: bool) -> (StatusCode, Json<Value>) {
    if !authorized(headers, github) {
        return unauthorized(github);
    }
    let (per_page, page) = (page.per_page.unwrap_or(if github { 30 } else { 20 }).min(100), page.page.unwrap_or(1));
    let comments = forge.comments.lock().unwrap();
    let items: Vec<Value> =
        comments.iter().skip((page - 1) * per_page).take(per_page).map(|(id, b)| comment(*id, b, github)).collect();
    (StatusCode::OK, Json(Value::Array(items)))
}

async fn write(
    forge: &Forge,
    headers: &HeaderMap,
    id: Option<u64>,
    body: Value,
    github: bool,
) -> (StatusCode, Json<Value>) {
    if !authorized(headers, github) {
        return unauthorized(github);
    }
    if let Some((status, answer)) = forge.refuse_next_write.lock().unwrap().take() {
        return (status, Json(answer));
    }
    let Some(text) = body["body"].as_str() else {
        return (StatusCode::BAD_REQUEST, Json(json!({"message": "body is missing"})));
    };
    let mut comments = forge.comments.lock().unwrap();
    match id {
        None => {
            let id = 1000 + comments.len() as u64;
            comments.push((id, text.to_owned()));
            (StatusCode::CREATED, Json(comment(id, text, github)))
        }
        Some(id) => match comments.iter_mut().find(|(c, _)| *c == id) {
            Some(slot) => {
                slot.1 = text.to_owned();
                (StatusCode::OK, Json(comment(id, text, github)))
            }
            None => (StatusCode::NOT_FOUND, Json(json!({"message": "Not Found"}))),
        },
    }
}

fn note(forge: &Forge, method: &Method, path: &str) {
    forge.requests.lock().unwrap().push(format!("{method} {path}"));
}

pub async fn start(forge: Shared) -> SocketAddr {
    let app = Router::new()
        .route(
            "/repos/{owner}/{repo}/issues/{n}/comments",
            get(|State(f): State<Shared>, h: HeaderMap, Path((o, r, n)): Path<(String, String, u64)>, Query(p): Query<Page>| async move {
                note(&f, &Method::GET, &format!("/repos/{o}/{r}/issues/{n}/comments?page={}", p.page.unwrap_or(1)));
                list(&f, &h, p, true).await
            })
            .post(|State(f): State<Shared>, h: HeaderMap, Path((o, r, n)): Path<(String, String, u64)>, Json(b): Json<Value>| async move {
                note(&f, &Method::POST, &format!("/repos/{o}/{r}/issues/{n}/comments"));
                write(&f, &h, None, b, true).await
            }),
        )
        .route(
            "/repos/{owner}/{repo}/issues/comments/{id}",
            patch(|State(f): State<Shared>, h: HeaderMap, Path((o, r, id)): Path<(String, String, u64)>, Json(b): Json<Value>| async move {
                note(&f, &Method::PATCH, &format!("/repos/{o}/{r}/issues/comments/{id}"));
                write(&f, &h, Some(id), b, true).await
            }),
        )
        .route(
            "/api/v4/projects/{project}/merge_requests/{iid}/notes",
            get(|State(f): State<Shared>, h: HeaderMap, Path((p, i)): Path<(String, u64)>, Query(q): Query<Page>| async move {
                note(&f, &Method::GET, &format!("/api/v4/projects/{p}/merge_requests/{i}/notes?page={}", q.page.unwrap_or(1)));
                list(&f, &h, q, false).await
            })
            .post(|State(f): State<Shared>, h: HeaderMap, Path((p, i)): Path<(String, u64)>, Json(b): Json<Value>| async move {
                note(&f, &Method::POST, &format!("/api/v4/projects/{p}/merge_requests/{i}/notes"));
                write(&f, &h, None, b, false).await
            }),
        )
        .route(
            "/api/v4/projects/{project}/merge_requests/{iid}/notes/{id}",
            put(|State(f): State<Shared>, h: HeaderMap, Path((p, i, id)): Path<(String, u64, u64)>, Json(b): Json<Value>| async move {
                note(&f, &Method::PUT, &format!("/api/v4/projects/{p}/merge_requests/{i}/notes/{id}"));
                write(&f, &h, Some(id), b, false).await
            }),
        )
        .with_state(forge);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}
