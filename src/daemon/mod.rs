//! `winfleet run`: the continuous GitOps loop.

pub mod http;
pub mod lease;
pub mod metrics;
pub mod trigger;
pub mod webhook;
