//! HTTP: path and query parsing, dispatch to the verbs, JSON responses.
//! Every handler path returns a `Status` on failure; none panics.

use std::collections::HashMap;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::ApiServer;
use super::eviction;
use super::ops::{self, Opts, PatchType};
use super::resources::{Target, parse_path};
use super::selectors::Selector;
use super::status::{ApiError, bad_request, internal, method_not_allowed, no_route, not_found};
use super::token_request;
use super::watch::{self, WatchSpec};
use super::{csr, identity, scale};

/// The API server as an axum router (a tower Service).
pub(crate) fn router(server: ApiServer) -> Router {
    Router::new().fallback(handle).with_state(server)
}

fn json_response(code: u16, v: &Value) -> Response {
    let mut resp =
        (StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), v.to_string()).into_response();
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

fn error_response(e: &ApiError) -> Response {
    json_response(e.code, &e.body())
}

async fn handle(State(server): State<ApiServer>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    if server.outage.is_down() {
        let body = json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure",
            "message": "the API server is down", "code": 503,
        });
        return json_response(503, &body);
    }
    let target = parts.uri.path_and_query().map_or_else(|| parts.uri.path().to_owned(), |p| p.as_str().to_owned());
    for hook in server.outage.hooks() {
        hook(&server, parts.method.as_str(), &target);
    }
    if let Some(fault) = server.take_fault(parts.method.as_str(), parts.uri.path()) {
        let body = json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure",
            "message": format!("injected fault {}", fault.status), "code": fault.status,
        });
        let mut resp = json_response(fault.status, &body);
        if let Some(after) = fault.retry_after {
            resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(after));
        }
        return resp;
    }
    let bytes = match axum::body::to_bytes(body, 64 << 20).await {
        Ok(b) => b,
        Err(e) => return error_response(&bad_request(format!("reading the request body: {e}"))),
    };
    let query: HashMap<String, String> =
        url::form_urlencoded::parse(parts.uri.query().unwrap_or_default().as_bytes()).into_owned().collect();
    let content_type = parts.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    match dispatch(&server, &parts.method, parts.uri.path(), &query, content_type, &bytes, &parts.headers) {
        Ok(resp) => resp,
        Err(e) => error_response(&e),
    }
}

fn version(git_version: &str) -> Value {
    let mut parts = git_version.trim_start_matches('v').split('.');
    let (major, minor) = (parts.next().unwrap_or("1"), parts.next().unwrap_or("33"));
    json!({
        "major": major,
        "minor": minor,
        "emulationMajor": major,
        "emulationMinor": minor,
        "minCompatibilityMajor": major,
        "minCompatibilityMinor": minor.parse::<u32>().map_or_else(|_| minor.to_owned(), |m| m.saturating_sub(1).to_string()),
        "gitVersion": git_version,
        "gitCommit": "a57b6f7709f6c2722b92f07b8b4c48210a51fc40",
        "gitTreeState": "clean",
        "buildDate": "2025-06-17T18:41:31Z",
        "goVersion": "go1.24.4",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

fn flag(q: &HashMap<String, String>, key: &str) -> bool {
    q.get(key).is_some_and(|v| v == "true" || v == "1")
}

fn dry_run(q: &HashMap<String, String>, body: Option<&Value>) -> Result<bool, ApiError> {
    let in_body = body.is_some_and(|b| {
        ["/dryRun", "/deleteOptions/dryRun", "/delete_options/dryRun"]
            .iter()
            .any(|p| b.pointer(p).and_then(Value::as_array).is_some_and(|a| a.iter().any(|v| v == "All")))
    });
    match q.get("dryRun").map(String::as_str) {
        None | Some("") => Ok(in_body),
        Some("All") => Ok(true),
        Some(other) => Err(bad_request(format!("Invalid dry run value: {other}: supported values: \"All\""))),
    }
}

fn patch_type(content_type: &str) -> Result<PatchType, ApiError> {
    PatchType::from_content_type(content_type).ok_or_else(|| {
        ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {content_type:?})"
            ),
        )
    })
}

fn parse_json(bytes: &[u8]) -> Result<Value, ApiError> {
    if bytes.is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_slice(bytes).map_err(|e| bad_request(format!("the body of the request could not be decoded: {e}")))
}

fn dispatch(
    server: &ApiServer,
    method: &Method,
    path: &str,
    q: &HashMap<String, String>,
    content_type: &str,
    bytes: &[u8],
    headers: &axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    if path == "/version" || path == "/version/" {
        let git_version = server.state.lock().map_err(|_| internal("the store lock is poisoned"))?.git_version.clone();
        return if method == Method::GET {
            Ok(json_response(200, &version(&git_version)))
        } else {
            Err(method_not_allowed())
        };
    }
    let Target { res, namespace, name, subresource } = parse_path(path).ok_or_else(no_route)?;
    let mut st = server.state.lock().map_err(|_| internal("the store lock is poisoned"))?;
    let who = identity::of(headers, &st.tokens)?;
    let body = if method == Method::PATCH { None } else { Some(parse_json(bytes)?) };
    let opts = Opts {
        res,
        namespace: namespace.clone(),
        subresource: subresource.clone(),
        dry_run: dry_run(q, body.as_ref())?,
        manager: q.get("fieldManager").filter(|m| !m.is_empty()).cloned(),
        force: flag(q, "force"),
        admit: true,
        record: true,
        allow_status: false,
    };
    let body = body.unwrap_or(Value::Null);
    let sub = subresource.as_deref();
    match (method.clone(), name.as_deref(), sub) {
        (Method::GET, None, None) => {
            let selector = Selector::parse(
                q.get("labelSelector").map(String::as_str),
                q.get("fieldSelector").map(String::as_str),
                res,
            )?;
            if flag(q, "watch") {
                let timeout = match q.get("timeoutSeconds") {
                    Some(t) => Some(Duration::from_secs(
                        t.parse().map_err(|_| bad_request(format!("invalid timeoutSeconds: {t}")))?,
                    )),
                    None => None,
                };
                let spec = WatchSpec {
                    res,
                    namespace,
                    selector,
                    resource_version: q.get("resourceVersion").cloned(),
                    timeout,
                    bookmarks: flag(q, "allowWatchBookmarks"),
                    send_initial_events: flag(q, "sendInitialEvents"),
                };
                let body = watch::start(&st, spec)?;
                let mut resp = Response::new(body);
                resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
                return Ok(resp);
            }
            let after = q.get("continue").filter(|c| !c.is_empty()).map(|c| match c.split_once('/') {
                Some((ns, n)) => (ns.to_string(), n.to_string()),
                None => (String::new(), c.clone()),
            });
            let limit = match q.get("limit") {
                Some(l) => l.parse::<usize>().map_err(|_| bad_request(format!("invalid limit: {l}")))?,
                None => 0,
            };
            let key = |o: &Value| {
                let s = |p: &str| o.pointer(p).and_then(Value::as_str).unwrap_or_default().to_string();
                (s("/metadata/namespace"), s("/metadata/name"))
            };
            let mut items: Vec<Value> = st
                .iter(res, namespace.as_deref())
                .filter(|o| selector.matches(o))
                .filter(|o| after.as_ref().is_none_or(|a| key(o) > *a))
                .cloned()
                .collect();
            let mut meta = json!({ "resourceVersion": st.rv.to_string() });
            if limit > 0 && items.len() > limit {
                let rest = items.split_off(limit);
                if let Some(last) = items.last() {
                    let (ns, n) = key(last);
                    meta["continue"] = json!(format!("{ns}/{n}"));
                    meta["remainingItemCount"] = json!(rest.len());
                }
            }
            let list = json!({
                "kind": format!("{}List", res.kind),
                "apiVersion": res.api_version(),
                "metadata": meta,
                "items": items,
            });
            Ok(json_response(200, &list))
        }
        (Method::GET, Some(n), None | Some("status")) => {
            let obj = st.get(res, namespace.as_deref(), n).ok_or_else(|| not_found(res, n))?;
            Ok(json_response(200, obj))
        }
        (Method::POST, None, None) if namespace.is_some() || !res.namespaced => {
            let mut body = body;
            if res.is_csr() {
                csr::on_create(&mut body, &who)?;
            }
            Ok(json_response(201, &ops::create(&mut st, &opts, body)?))
        }
        (Method::PUT | Method::PATCH, Some(n), Some(sub @ ("approval" | "status"))) if res.is_csr() => {
            let old = st.get(res, None, n).cloned().ok_or_else(|| not_found(res, n))?;
            let candidate =
                if method == Method::PUT { body } else { ops::patched(&old, patch_type(content_type)?, bytes)? };
            let new = if sub == "approval" {
                let mut new = csr::approval(n, &old, &candidate)?;
                if let Some(rv) = candidate.pointer("/metadata/resourceVersion") {
                    new["metadata"]["resourceVersion"] = rv.clone();
                }
                new
            } else {
                csr::check_status_write(n, &old, &candidate)?;
                candidate
            };
            let written = ops::replace(&mut st, &opts, n, new)?;
            if sub == "approval" && !opts.dry_run {
                let ca = st.ca();
                if let Some(status) = csr::sign(&written, &ca) {
                    let mut signed = written.clone();
                    signed["status"] = status;
                    let signer = Opts {
                        subresource: Some("status".into()),
                        manager: Some("kube-controller-manager".into()),
                        admit: false,
                        ..opts.clone()
                    };
                    ops::replace(&mut st, &signer, n, signed)?;
                }
            }
            Ok(json_response(200, &written))
        }
        (Method::GET, Some(n), Some("scale")) if scale::served(res) => {
            Ok(json_response(200, &scale::of(st.get(res, namespace.as_deref(), n).ok_or_else(|| not_found(res, n))?)))
        }
        (Method::PUT | Method::PATCH, Some(n), Some("scale")) if scale::served(res) => {
            let old = scale::of(st.get(res, namespace.as_deref(), n).ok_or_else(|| not_found(res, n))?);
            let new = if method == Method::PUT { body } else { ops::patched(&old, patch_type(content_type)?, bytes)? };
            Ok(json_response(200, &scale::write(&mut st, &opts, n, &new)?))
        }
        (Method::POST, Some(n), Some("token")) if res.kind == "ServiceAccount" => {
            let namespace = namespace.as_deref().unwrap_or_default();
            Ok(json_response(201, &token_request::mint(&mut st, res, namespace, n, &body)?))
        }
        (Method::POST, Some(n), Some("eviction")) => {
            Ok(json_response(201, &eviction::evict(&mut st, &opts, n, &body)?))
        }
        (Method::PUT, Some(n), None | Some("status")) => {
            Ok(json_response(200, &ops::replace(&mut st, &opts, n, body)?))
        }
        (Method::PATCH, Some(n), None | Some("status")) => {
            Ok(json_response(200, &ops::patch(&mut st, &opts, n, patch_type(content_type)?, bytes)?))
        }
        (Method::DELETE, Some(n), None) => Ok(json_response(200, &ops::delete(&mut st, &opts, n, &body)?)),
        _ => Err(method_not_allowed()),
    }
}
