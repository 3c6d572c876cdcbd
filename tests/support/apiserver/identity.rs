//! Who a request comes from, as kube-apiserver's authenticators decide it:
//! impersonation headers (`Impersonate-User`, repeated `Impersonate-Group`;
//! kube's client sends them when its config impersonates; no authorization
//! is checked here), else a bearer token from the server's token table
//! (an unknown token is 401), else `system:anonymous`. Authenticated users
//! also get `system:authenticated`, as the real server adds it.

use std::collections::HashMap;

use axum::http::HeaderMap;

use super::status::ApiError;

/// A requesting user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub user: String,
    pub uid: String,
    pub groups: Vec<String>,
}

/// Decides the identity of a request.
pub(crate) fn of(headers: &HeaderMap, tokens: &HashMap<String, Identity>) -> Result<Identity, ApiError> {
    let text = |v: &axum::http::HeaderValue| v.to_str().unwrap_or_default().to_owned();
    if let Some(user) = headers.get("impersonate-user") {
        let mut groups: Vec<String> = headers.get_all("impersonate-group").iter().map(text).collect();
        authenticated(&mut groups);
        return Ok(Identity { user: text(user), uid: String::new(), groups });
    }
    if let Some(auth) = headers.get(axum::http::header::AUTHORIZATION) {
        let auth = text(auth);
        if let Some(token) = auth.strip_prefix("Bearer ") {
            return tokens.get(token.trim()).cloned().ok_or_else(|| ApiError::new(401, "Unauthorized", "Unauthorized"));
        }
    }
    Ok(Identity { user: "system:anonymous".into(), uid: String::new(), groups: vec!["system:unauthenticated".into()] })
}

/// Adds `system:authenticated` to an authenticated user's groups.
pub(crate) fn authenticated(groups: &mut Vec<String>) {
    if !groups.iter().any(|g| g == "system:authenticated") {
        groups.push("system:authenticated".into());
    }
}
