//! The object store: objects, the global resourceVersion counter, the watch
//! event log, history, and the single commit point every write goes through.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::resources::Resource;
use super::status::{ApiError, invalid};
use super::{Admission, Hook, Write};

/// (group, plural, namespace or "", name).
pub(crate) type Key = (&'static str, &'static str, String, String);

/// How many watch events are kept for resuming watches.
pub(crate) const LOG_CAPACITY: usize = 1000;

/// A persisted change, as watchers see it.
#[derive(Debug)]
pub(crate) struct Event {
    pub rv: u64,
    pub res: (&'static str, &'static str),
    /// ADDED, MODIFIED or DELETED.
    pub kind: &'static str,
    pub object: Value,
    /// The object before a MODIFIED change (for selector transitions).
    pub old: Option<Value>,
}

pub(crate) struct State {
    pub objects: BTreeMap<Key, Value>,
    pub rv: u64,
    pub uids: u64,
    pub log: VecDeque<Arc<Event>>,
    /// Highest resourceVersion whose event has left the log.
    pub log_floor: u64,
    pub tx: broadcast::Sender<Arc<Event>>,
    pub history: Vec<Write>,
    pub dry_runs: Vec<Write>,
    pub hooks: Vec<Arc<Hook>>,
    /// Bearer tokens the server accepts, and whose they are.
    pub tokens: std::collections::HashMap<String, super::identity::Identity>,
    /// The signer's CA, made on first use.
    pub ca: Option<Arc<super::csr::TestCa>>,
    /// Faults to serve instead of answering (see `ApiServer::fail`).
    pub faults: Vec<super::Fault>,
    /// Faults served so far: (method, path, status).
    pub faults_served: Vec<(String, String, u16)>,
    /// Bumped to end every open watch stream at once (`ApiServer::drop_watches`).
    pub drops: tokio::sync::watch::Sender<u64>,
    /// The `gitVersion` `/version` answers (`ApiServer::set_version`).
    pub git_version: String,
}

impl State {
    pub fn new() -> Self {
        let (tx, _) = broadcast::channel(LOG_CAPACITY);
        Self {
            objects: BTreeMap::new(),
            rv: 0,
            uids: 0,
            log: VecDeque::new(),
            log_floor: 0,
            tx,
            history: Vec::new(),
            dry_runs: Vec::new(),
            hooks: Vec::new(),
            tokens: std::collections::HashMap::new(),
            ca: None,
            faults: Vec::new(),
            faults_served: Vec::new(),
            drops: tokio::sync::watch::Sender::new(0),
            git_version: "v1.33.2".to_owned(),
        }
    }

    pub fn key(res: &Resource, ns: Option<&str>, name: &str) -> Key {
        (res.group, res.plural, ns.unwrap_or_default().to_string(), name.to_string())
    }

    pub fn get(&self, res: &Resource, ns: Option<&str>, name: &str) -> Option<&Value> {
        self.objects.get(&Self::key(res, ns, name))
    }

    /// Objects of one type, in one namespace or all, sorted by namespace/name.
    pub fn iter<'s>(&'s self, res: &'s Resource, ns: Option<&'s str>) -> impl Iterator<Item = &'s Value> + 's {
        self.objects
            .range((res.group, res.plural, String::new(), String::new())..)
            .take_while(move |(k, _)| k.0 == res.group && k.1 == res.plural)
            .filter(move |(k, _)| ns.is_none_or(|ns| k.2 == ns))
            .map(|(_, v)| v)
    }

    /// The signer's CA.
    pub fn ca(&mut self) -> Arc<super::csr::TestCa> {
        Arc::clone(self.ca.get_or_insert_with(|| Arc::new(super::csr::TestCa::new())))
    }

    pub fn next_uid(&mut self) -> String {
        self.uids += 1;
        format!("6b1e0000-0000-4000-8000-{:012x}", self.uids)
    }

    /// A generateName suffix.
    pub fn next_suffix(&mut self) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        self.uids += 1;
        let mut n = self.uids.wrapping_mul(2_654_435_761);
        (0..5)
            .map(|_| {
                let c = ALPHABET[(n % ALPHABET.len() as u64) as usize] as char;
                n /= ALPHABET.len() as u64;
                c
            })
            .collect()
    }

    /// The one place writes happen. Runs admission hooks (when `c.admit`),
    /// skips no-op updates, then either records a dry run or persists:
    /// bumps the resourceVersion, stores or removes, logs and broadcasts the
    /// watch event, and appends to history.
    ///
    /// `new` None deletes `old`. Returns the object as stored (or as it
    /// would be, for dry runs), or the deleted object.
    pub fn commit(&mut self, c: Change, old: Option<&Value>, new: Option<Value>) -> Result<Value, ApiError> {
        let shown = match (&new, old) {
            (Some(n), _) => n.clone(),
            (None, Some(o)) => o.clone(),
            (None, None) => return Err(super::status::internal("nothing to write")),
        };
        if c.admit {
            let adm = Admission {
                verb: c.verb.to_string(),
                resource: c.res.plural.to_string(),
                namespace: c.namespace.clone(),
                name: c.name.clone(),
                dry_run: c.dry_run,
                object: shown.clone(),
            };
            for hook in &self.hooks {
                if let Some(msg) = hook(&adm) {
                    return Err(invalid(msg));
                }
            }
        }
        if let (Some(n), Some(o)) = (&new, old)
            && n == o
        {
            return Ok(n.clone());
        }
        let mut write = Write {
            at: tokio::time::Instant::now(),
            verb: c.verb.to_string(),
            resource: c.res.plural.to_string(),
            namespace: c.namespace.clone(),
            name: c.name.clone(),
            subresource: c.subresource.clone(),
            field_manager: c.manager.clone(),
            object: shown,
        };
        if c.dry_run {
            self.dry_runs.push(write.clone());
            return Ok(write.object);
        }
        self.rv += 1;
        let rv = self.rv;
        let key = Self::key(c.res, c.namespace.as_deref(), &c.name);
        let (kind, object, previous) = match new {
            Some(mut n) => {
                n["metadata"]["resourceVersion"] = json!(rv.to_string());
                let previous = self.objects.insert(key, n.clone());
                (if previous.is_some() { "MODIFIED" } else { "ADDED" }, n, previous)
            }
            None => {
                let mut gone = self.objects.remove(&key).unwrap_or(write.object.clone());
                gone["metadata"]["resourceVersion"] = json!(rv.to_string());
                ("DELETED", gone, None)
            }
        };
        write.object = object.clone();
        let event = Arc::new(Event { rv, res: c.res.key(), kind, object: object.clone(), old: previous });
        self.log.push_back(event.clone());
        while self.log.len() > LOG_CAPACITY {
            if let Some(e) = self.log.pop_front() {
                self.log_floor = e.rv;
            }
        }
        // No receivers is fine.
        let _ = self.tx.send(event);
        if c.record {
            self.history.push(write);
        }
        // The disruption controller follows the pods and budgets it reads.
        let budgets = c.res.plural == "poddisruptionbudgets" && c.subresource.as_deref() != Some("status");
        if ((c.res.group.is_empty() && c.res.plural == "pods") || budgets)
            && let Some(ns) = c.namespace.as_deref()
        {
            super::eviction::refresh_budgets(self, ns);
        }
        Ok(object)
    }
}

/// Describes one write for [`State::commit`].
pub(crate) struct Change {
    pub verb: &'static str,
    pub res: &'static Resource,
    pub namespace: Option<String>,
    pub name: String,
    pub subresource: Option<String>,
    pub manager: Option<String>,
    pub dry_run: bool,
    /// Run the admission hooks (false for the test's own out-of-band writes).
    pub admit: bool,
    /// Append to history (false for seeds).
    pub record: bool,
}

/// RFC 3339 UTC with seconds, like metav1.Time.
pub(crate) fn now() -> String {
    k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}
