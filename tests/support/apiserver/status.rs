//! `Status` error bodies, shaped like the real API server's.

use serde_json::{Value, json};

use super::resources::Resource;

/// An API error: becomes a `Status` body with `code` as the HTTP status.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self { code, reason, message: message.into(), details: None }
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// The `Status` object.
    pub fn body(&self) -> Value {
        let mut v = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            v["details"] = d.clone();
        }
        v
    }
}

fn details(res: &Resource, name: &str) -> Value {
    json!({ "name": name, "group": res.group, "kind": res.plural })
}

pub(crate) fn not_found(res: &Resource, name: &str) -> ApiError {
    ApiError::new(404, "NotFound", format!("{} \"{name}\" not found", res.qualified())).with_details(details(res, name))
}

pub(crate) fn no_route() -> ApiError {
    ApiError::new(404, "NotFound", "the server could not find the requested resource")
        .with_details(json!({ "causes": [{ "reason": "UnexpectedServerResponse", "message": "404 page not found" }] }))
}

pub(crate) fn already_exists(res: &Resource, name: &str) -> ApiError {
    ApiError::new(409, "AlreadyExists", format!("{} \"{name}\" already exists", res.qualified()))
        .with_details(details(res, name))
}

pub(crate) fn conflict(res: &Resource, name: &str) -> ApiError {
    ApiError::new(
        409,
        "Conflict",
        format!(
            "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
            res.qualified()
        ),
    )
    .with_details(details(res, name))
}

pub(crate) fn bad_request(message: impl Into<String>) -> ApiError {
    ApiError::new(400, "BadRequest", message)
}

pub(crate) fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::new(422, "Invalid", message)
}

pub(crate) fn internal(message: impl Into<String>) -> ApiError {
    let message = message.into();
    ApiError::new(500, "InternalError", format!("Internal error occurred: {message}"))
        .with_details(json!({ "causes": [{ "message": message }] }))
}

pub(crate) fn method_not_allowed() -> ApiError {
    ApiError::new(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
}

pub(crate) fn gone(message: impl Into<String>) -> ApiError {
    ApiError::new(410, "Expired", message)
}

/// A successful `Status` (eviction answers with one).
pub(crate) fn success(code: u16) -> Value {
    json!({ "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code })
}
