//! winfleet: run the Windows worker nodes of an OpenShift/Kubernetes cluster
//! from a Git repository.
//!
//! One reconcile round is a straight pipeline (docs/ARCHITECTURE.md); each stage is a
//! module with one job, and only the ends touch the outside world:
//!
//! ```text
//!  source ──► desired ──► observe ──► plan ──► apply ──► report
//!  (git2)     (load,      (SSH facts,  (pure     (SSH ops,  (status files,
//!             validate,    kube reads)  diff)     kube       commit + push)
//!             render)                             writes)
//! ```
//!
//! The stages, their order and what each must never do are in
//! docs/ARCHITECTURE.md (tests/architecture.rs keeps the imports to it).
//!
//! - [`vocab`] is the vocabulary every stage shares (`Shell`, managed files,
//!   node paths, the report framing, `Operation`, systemd's formats);
//!   [`known_hosts`] pins SSH host keys for nodes and Git remotes.
//! - [`source`] reads a repository's working tree or a committed revision.
//! - [`desired`] loads, validates (syntax → schema → types → rules) and
//!   renders every node's [`node::NodeSpec`] and the cluster objects.
//! - [`render`] holds the pure renderers (hosts.toml, mirrors, credentials).
//! - [`plan`] compares two desired states (the offline plan for review) and
//!   prints plans as text, markdown or JSON.
//! - [`duration`] is the one duration parser (Fleet fields and flags).
//! - [`diagnostic`] is the one vocabulary for what validation reports.
//! - [`node`] holds what a node should have ([`node::NodeSpec`]), what it
//!   was observed to have ([`node::facts::NodeFacts`]) and the pure
//!   [`node::plan::plan_node`] between them.
//! - [`dialect`] renders the observe and apply scripts (posix, PowerShell).
//! - [`ssh`] is the transport: pinned host keys, timeouts, retries, a pool.
//! - [`engine`] runs a round: observe → plan → apply per node, in parallel.
//! - [`cluster`] is the Kubernetes side (observe, associate, MachineSets,
//!   Node metadata, drain, safe reboots); [`reconcile`] runs the whole round.
//! - [`status`] renders the status files (pure) and publishes them to Git.
//! - [`progress`] names the long steps of a round as tracing events.
//! - [`daemon`] is `winfleet run`: triggers, schedule, webhook, metrics,
//!   leader election, one round at a time.

pub mod cluster;
pub mod daemon;
pub mod desired;
pub mod diagnostic;
pub mod dialect;
pub mod duration;
pub mod engine;
pub mod import;
pub mod known_hosts;
pub mod lifecycle;
pub mod node;
pub mod payload;
pub mod plan;
pub mod progress;
pub mod reconcile;
pub mod render;
pub mod source;
pub mod ssh;
pub mod status;
pub mod vocab;
