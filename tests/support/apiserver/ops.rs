//! The write verbs: create, replace (PUT), patch (merge, strategic, JSON,
//! apply) and delete, with the validation the real server does before
//! admission.

use serde_json::{Value, json};

use super::crd;
use super::managed::{self, Writer};
use super::resources::Resource;
use super::status::{ApiError, already_exists, bad_request, conflict, internal, invalid, not_found};
use super::store::{Change, State, now};

/// Who is writing and how, for one request.
#[derive(Debug, Clone)]
pub(crate) struct Opts {
    pub res: &'static Resource,
    pub namespace: Option<String>,
    pub subresource: Option<String>,
    pub dry_run: bool,
    pub manager: Option<String>,
    pub force: bool,
    /// Run admission hooks / record in history (false for test helpers).
    pub admit: bool,
    pub record: bool,
    /// Let a main-resource write change status (the test's `update`).
    pub allow_status: bool,
}

impl Opts {
    fn change(&self, verb: &'static str, name: &str) -> Change {
        Change {
            verb,
            res: self.res,
            namespace: self.namespace.clone(),
            name: name.to_string(),
            subresource: self.subresource.clone(),
            manager: self.manager.clone(),
            dry_run: self.dry_run,
            admit: self.admit,
            record: self.record,
        }
    }

    fn manager(&self) -> &str {
        self.manager.as_deref().unwrap_or("unknown")
    }

    /// Status is not owned through the main resource when it has a status subresource.
    fn skip_status(&self) -> bool {
        self.res.has_status() && self.subresource.is_none()
    }

    /// A custom resource's write as the real server decodes it ([`crd::decode`]).
    fn structural(&self, v: &mut Value, creating: bool) {
        crd::decode(self.res, self.subresource.as_deref(), v, creating);
    }
}

fn str_at<'v>(v: &'v Value, ptr: &str) -> Option<&'v str> {
    v.pointer(ptr).and_then(Value::as_str)
}

/// apiVersion and kind must be present and name this resource.
pub(crate) fn check_type(res: &Resource, v: &Value) -> Result<(), ApiError> {
    if !v.is_object() {
        return Err(bad_request("the body of the request was in an unknown format - expected a JSON object"));
    }
    let expected = res.api_version();
    match str_at(v, "/apiVersion") {
        None | Some("") => return Err(bad_request(format!("Object 'apiVersion' is missing in '{v}'"))),
        Some(av) if av != expected => {
            return Err(bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({expected})"
            )));
        }
        _ => {}
    }
    match str_at(v, "/kind") {
        None | Some("") => Err(bad_request(format!("Object 'Kind' is missing in '{v}'"))),
        Some(k) if k != res.kind => {
            Err(bad_request(format!("the kind in the data ({k}) does not match the expected kind ({})", res.kind)))
        }
        _ => Ok(()),
    }
}

/// The body's namespace must match the URL's; cluster-scoped objects lose theirs.
fn check_namespace(o: &Opts, v: &mut Value) -> Result<(), ApiError> {
    let body_ns = str_at(v, "/metadata/namespace").filter(|s| !s.is_empty()).map(str::to_string);
    match (&o.namespace, body_ns) {
        (Some(url), Some(body)) if *url != body => {
            Err(bad_request("the namespace of the provided object does not match the namespace sent on the request"))
        }
        (Some(url), _) => {
            ensure_meta(v)["namespace"] = json!(url);
            Ok(())
        }
        (None, _) => {
            if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("namespace");
            }
            Ok(())
        }
    }
}

fn ensure_meta(v: &mut Value) -> &mut Value {
    if !v.get("metadata").is_some_and(Value::is_object) {
        v["metadata"] = json!({});
    }
    &mut v["metadata"]
}

/// What a generation counts: everything but metadata, and but status
/// when it is a subresource (a custom resource without one, like
/// Network, gets a new generation for a status change too).
fn without_meta_and_status(v: &Value, status_sub: bool) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("metadata");
        if status_sub {
            m.remove("status");
        }
    }
    v
}

/// Create (POST), and the create half of apply.
pub(crate) fn create(st: &mut State, o: &Opts, mut body: Value) -> Result<Value, ApiError> {
    check_type(o.res, &body)?;
    super::builtin::decode(o.res, &mut body)?;
    check_namespace(o, &mut body)?;
    o.structural(&mut body, true);
    let mut name = str_at(&body, "/metadata/name").unwrap_or_default().to_string();
    if name.is_empty() {
        match str_at(&body, "/metadata/generateName").filter(|g| !g.is_empty()) {
            Some(g) => name = format!("{g}{}", st.next_suffix()),
            None => {
                return Err(invalid(format!(
                    "{} \"\" is invalid: metadata.name: Required value: name or generateName is required",
                    o.res.kind
                )));
            }
        }
    }
    if str_at(&body, "/metadata/resourceVersion").is_some_and(|s| !s.is_empty()) {
        return Err(internal("resourceVersion should not be set on objects to be created"));
    }
    if st.get(o.res, o.namespace.as_deref(), &name).is_some() {
        return Err(already_exists(o.res, &name));
    }
    let uid = st.next_uid();
    let meta = ensure_meta(&mut body);
    meta["name"] = json!(name);
    meta["uid"] = json!(uid);
    meta["creationTimestamp"] = json!(now());
    meta["generation"] = json!(1);
    if let Some(m) = meta.as_object_mut() {
        m.remove("managedFields");
        m.remove("resourceVersion");
        m.remove("deletionTimestamp");
    }
    let fields = managed::leaves(&body, o.skip_status());
    let mut entries = Vec::new();
    let now = now();
    let api_version = o.res.api_version();
    let w = Writer { manager: o.manager(), api_version: &api_version, subresource: None, now: &now };
    managed::record_update(&mut entries, &w, &fields, &Default::default());
    managed::store_entries(&mut body, &entries);
    st.commit(o.change("create", &name), None, Some(body))
}

/// Server-owned metadata comes from the stored object; status follows the
/// subresource rules; generation bumps when anything but metadata/status changed.
fn normalize(o: &Opts, old: &Value, mut new: Value) -> Value {
    for k in ["name", "namespace", "uid", "creationTimestamp", "generation", "resourceVersion", "deletionTimestamp"] {
        match old.pointer(&format!("/metadata/{k}")) {
            Some(v) => ensure_meta(&mut new)[k] = v.clone(),
            None => {
                if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.remove(k);
                }
            }
        }
    }
    if matches!(o.subresource.as_deref(), Some("status" | "approval")) {
        let mut only_status = old.clone();
        match new.get("status") {
            Some(s) => only_status["status"] = s.clone(),
            None => {
                if let Some(m) = only_status.as_object_mut() {
                    m.remove("status");
                }
            }
        }
        new = only_status;
    } else if o.res.has_status() && !o.allow_status {
        match old.get("status") {
            Some(s) => new["status"] = s.clone(),
            None => {
                if let Some(m) = new.as_object_mut() {
                    m.remove("status");
                }
            }
        }
    }
    let status_sub = o.res.has_status();
    if without_meta_and_status(old, status_sub) != without_meta_and_status(&new, status_sub) {
        let generation = old.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0);
        ensure_meta(&mut new)["generation"] = json!(generation + 1);
    }
    new
}

/// Checks an update candidate against the stored object: type, name,
/// namespace, and the resourceVersion precondition.
fn check_update(o: &Opts, name: &str, old: &Value, candidate: &mut Value) -> Result<(), ApiError> {
    check_type(o.res, candidate)?;
    super::builtin::decode(o.res, candidate)?;
    if let Some(body_name) = str_at(candidate, "/metadata/name").filter(|n| !n.is_empty())
        && body_name != name
    {
        return Err(bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    check_namespace(o, candidate)?;
    let want = str_at(candidate, "/metadata/resourceVersion").unwrap_or_default();
    let have = str_at(old, "/metadata/resourceVersion").unwrap_or_default();
    if !want.is_empty() && want != have {
        return Err(conflict(o.res, name));
    }
    Ok(())
}

/// Finishes a non-apply update (PUT or merge/strategic/JSON patch).
fn update(
    st: &mut State,
    o: &Opts,
    verb: &'static str,
    name: &str,
    old: &Value,
    mut candidate: Value,
) -> Result<Value, ApiError> {
    check_update(o, name, old, &mut candidate)?;
    o.structural(&mut candidate, false);
    let mut new = normalize(o, old, candidate);
    let mut entries = managed::entries(old);
    let (changed, removed) = managed::diff(old, &new, o.skip_status());
    if !changed.is_empty() || !removed.is_empty() {
        let now = now();
        let api_version = o.res.api_version();
        let w = Writer {
            manager: o.manager(),
            api_version: &api_version,
            subresource: o.subresource.as_deref(),
            now: &now,
        };
        managed::record_update(&mut entries, &w, &changed, &removed);
    }
    managed::store_entries(&mut new, &entries);
    st.commit(o.change(verb, name), Some(old), Some(new))
}

fn stored(st: &State, o: &Opts, name: &str) -> Result<Value, ApiError> {
    st.get(o.res, o.namespace.as_deref(), name).cloned().ok_or_else(|| not_found(o.res, name))
}

/// PUT. A missing object is 404 (no create-on-update).
pub(crate) fn replace(st: &mut State, o: &Opts, name: &str, body: Value) -> Result<Value, ApiError> {
    let old = stored(st, o, name)?;
    update(st, o, "update", name, &old, body)
}

/// The test's out-of-band update: `f` may change anything, status included.
pub(crate) fn mutate(st: &mut State, o: &Opts, name: &str, f: impl FnOnce(&mut Value)) -> Result<Value, ApiError> {
    let old = stored(st, o, name)?;
    let mut new = old.clone();
    f(&mut new);
    update(st, o, "update", name, &old, new)
}

/// The patch content types.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum PatchType {
    Merge,
    Strategic,
    Json,
    Apply,
}

impl PatchType {
    pub fn from_content_type(ct: &str) -> Option<Self> {
        match ct.split(';').next().unwrap_or_default().trim() {
            "application/merge-patch+json" => Some(Self::Merge),
            "application/strategic-merge-patch+json" => Some(Self::Strategic),
            "application/json-patch+json" => Some(Self::Json),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => Some(Self::Apply),
            _ => None,
        }
    }
}

/// RFC 7386 merge patch.
pub(crate) fn merge_patch(target: &mut Value, patch: &Value) {
    match patch.as_object() {
        Some(p) => {
            if !target.is_object() {
                *target = json!({});
            }
            if let Some(t) = target.as_object_mut() {
                for (k, v) in p {
                    if v.is_null() {
                        t.remove(k);
                    } else {
                        merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                    }
                }
            }
        }
        None => *target = patch.clone(),
    }
}

/// Strips strategic-merge directives (`$patch`, `$retainKeys`,
/// `$setElementOrder/...`, `$deleteFromPrimitiveList/...`): lists are replaced whole.
fn strip_directives(v: &mut Value) {
    if let Some(m) = v.as_object_mut() {
        m.retain(|k, _| !k.starts_with('$'));
        m.values_mut().for_each(strip_directives);
    }
}

fn parse_body(bytes: &[u8], yaml: bool) -> Result<Value, ApiError> {
    match serde_json::from_slice(bytes) {
        Ok(v) => Ok(v),
        Err(e) if !yaml => Err(bad_request(format!("error decoding patch: {e}"))),
        Err(_) => {
            let s = std::str::from_utf8(bytes).map_err(|e| bad_request(format!("error decoding YAML: {e}")))?;
            serde_saphyr::from_str::<Value>(s).map_err(|e| bad_request(format!("error decoding YAML: {e}")))
        }
    }
}

/// PATCH of any type.
pub(crate) fn patch(st: &mut State, o: &Opts, name: &str, pt: PatchType, bytes: &[u8]) -> Result<Value, ApiError> {
    if pt == PatchType::Apply {
        return apply(st, o, name, parse_body(bytes, true)?);
    }
    if o.force {
        return Err(invalid(
            "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch",
        ));
    }
    let old = stored(st, o, name)?;
    let candidate = patched(&old, pt, bytes)?;
    update(st, o, "patch", name, &old, candidate)
}

/// `old` with a non-apply patch applied (nothing stored).
pub(crate) fn patched(old: &Value, pt: PatchType, bytes: &[u8]) -> Result<Value, ApiError> {
    let mut candidate = old.clone();
    match pt {
        PatchType::Merge | PatchType::Strategic => {
            let mut p = parse_body(bytes, false)?;
            if !p.is_object() {
                return Err(bad_request("error decoding patch: merge patch must be a JSON object"));
            }
            if pt == PatchType::Strategic {
                strip_directives(&mut p);
            }
            merge_patch(&mut candidate, &p);
        }
        PatchType::Json => {
            let p: json_patch::Patch =
                serde_json::from_slice(bytes).map_err(|e| bad_request(format!("error decoding patch: {e}")))?;
            // The real server answers a failing operation with 422.
            json_patch::patch(&mut candidate, &p).map_err(|e| invalid(e.to_string()))?;
        }
        PatchType::Apply => return Err(bad_request("apply patches are not supported on this subresource")),
    }
    Ok(candidate)
}

/// Server-side apply (creates the object when missing).
fn apply(st: &mut State, o: &Opts, name: &str, mut applied: Value) -> Result<Value, ApiError> {
    let manager = o.manager.as_deref().filter(|m| !m.is_empty()).ok_or_else(|| {
        invalid("PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch")
    })?;
    check_type(o.res, &applied)?;
    match str_at(&applied, "/metadata/name") {
        Some(n) if n == name => {}
        Some(n) => {
            return Err(bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )));
        }
        None => return Err(bad_request("metadata.name: Required value: name is required")),
    }
    check_namespace(o, &mut applied)?;
    if applied.pointer("/metadata/managedFields").is_some_and(|m| !m.is_null()) {
        return Err(bad_request("metadata.managedFields must be nil"));
    }
    if let Some(field) = o.res.crd().and_then(|crd| crd.undeclared(&applied)) {
        return Err(crd::undeclared(o.res, o.namespace.as_deref(), name, &field));
    }
    let now = now();
    let api_version = o.res.api_version();
    let w = Writer { manager, api_version: &api_version, subresource: o.subresource.as_deref(), now: &now };
    match st.get(o.res, o.namespace.as_deref(), name).cloned() {
        None => {
            if o.subresource.is_some() {
                return Err(not_found(o.res, name));
            }
            let mut skeleton = json!({ "apiVersion": api_version, "kind": o.res.kind, "metadata": { "name": name } });
            if let Some(ns) = &o.namespace {
                skeleton["metadata"]["namespace"] = json!(ns);
            }
            let mut merged = managed::apply(&skeleton, &applied, &w, o.force, o.skip_status())?;
            o.structural(&mut merged, true);
            if str_at(&applied, "/metadata/resourceVersion").is_some_and(|s| !s.is_empty()) {
                return Err(not_found(o.res, name));
            }
            let meta = ensure_meta(&mut merged);
            meta["uid"] = json!(st.next_uid());
            meta["creationTimestamp"] = json!(now);
            meta["generation"] = json!(1);
            st.commit(o.change("apply", name), None, Some(merged))
        }
        Some(old) => {
            let want = str_at(&applied, "/metadata/resourceVersion").unwrap_or_default();
            if !want.is_empty() && want != str_at(&old, "/metadata/resourceVersion").unwrap_or_default() {
                return Err(conflict(o.res, name));
            }
            let mut merged = managed::apply(&old, &applied, &w, o.force, o.skip_status())?;
            o.structural(&mut merged, false);
            let managed_fields = merged.pointer("/metadata/managedFields").cloned();
            let mut new = normalize(o, &old, merged);
            match managed_fields {
                Some(m) => ensure_meta(&mut new)["managedFields"] = m,
                None => {
                    if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                        m.remove("managedFields");
                    }
                }
            }
            st.commit(o.change("apply", name), Some(&old), Some(new))
        }
    }
}

/// DELETE, honouring `preconditions` (uid, resourceVersion). Deletion is
/// immediate: no graceful termination, no finalizers.
pub(crate) fn delete(st: &mut State, o: &Opts, name: &str, options: &Value) -> Result<Value, ApiError> {
    let old = stored(st, o, name)?;
    for (field, ptr) in [("UID", "uid"), ("ResourceVersion", "resourceVersion")] {
        if let Some(want) = str_at(options, &format!("/preconditions/{ptr}")) {
            let have = str_at(&old, &format!("/metadata/{ptr}")).unwrap_or_default();
            if want != have {
                return Err(ApiError::new(
                    409,
                    "Conflict",
                    format!(
                        "Operation cannot be fulfilled on {} \"{name}\": Precondition failed: {field} in precondition: {want}, {field} in object meta: {have}",
                        o.res.qualified()
                    ),
                ));
            }
        }
    }
    st.commit(o.change("delete", name), Some(&old), None)
}
