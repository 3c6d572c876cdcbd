//! Which replica acts, and whether anyone acts at all: leader election on a
//! Lease ([`lease`]), the hand-over of webhooks and control requests to the
//! leader ([`forward`]), and suspension out of band ([`suspend`]).

pub mod forward;
pub mod lease;
pub mod suspend;
