//! The Lease decisions, pure: the periods the elector runs on, when a
//! Lease has expired, and the spec a candidate writes to acquire, renew or
//! release it (client-go's `tryAcquireOrRenew` and `release`). The requests
//! are in the parent module.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use tokio::time::Instant;

use super::LeaseConfig;

/// The periods the task runs on, made safe whatever the configuration says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Timing {
    /// Written as `leaseDurationSeconds`.
    pub(super) lease_seconds: i32,
    pub(super) renew_every: Duration,
    pub(super) retry_every: Duration,
    /// A leader that has not renewed for this long steps down.
    pub(super) renew_deadline: Duration,
}

pub(super) const MIN_PERIOD: Duration = Duration::from_millis(10);
/// Caps every period so no `Instant` arithmetic can overflow.
pub(super) const MAX_PERIOD: Duration = Duration::from_secs(24 * 3600);

pub(super) fn timing(c: &LeaseConfig) -> Timing {
    let lease = c.lease_duration.clamp(Duration::from_secs(1), MAX_PERIOD);
    let seconds = lease.as_secs() + u64::from(lease.subsec_nanos() > 0);
    let renew_every = c.renew_every.max(MIN_PERIOD).min(lease / 3);
    Timing {
        lease_seconds: i32::try_from(seconds).unwrap_or(i32::MAX),
        renew_every,
        retry_every: c.retry_every.clamp(MIN_PERIOD, MAX_PERIOD),
        renew_deadline: lease.saturating_sub(renew_every),
    }
}

/// The holder named in a spec; an empty name is no holder.
pub(super) fn holder(spec: &LeaseSpec) -> Option<&str> {
    spec.holder_identity.as_deref().filter(|h| !h.is_empty())
}

/// Whether `leaseDurationSeconds` have passed since this process first saw
/// `spec` (at `seen`, on its own clock).
pub(super) fn expired(spec: &LeaseSpec, seen: Instant, now: Instant) -> bool {
    let seconds = u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0);
    seen.checked_add(Duration::from_secs(seconds)).is_some_and(|end| end <= now)
}

/// What a candidate may do with the Lease spec it just read.
#[derive(Debug, PartialEq)]
pub(super) enum Verdict {
    /// Write this spec (acquire or renew).
    Write(LeaseSpec),
    /// Someone else holds the Lease.
    Held(String),
}

/// client-go's `tryAcquireOrRenew` after the read: another holder keeps the
/// Lease while it is valid, and always as far as a leader is concerned (a
/// leader that sees another holder has been replaced and steps down).
pub(super) fn decide(
    old: &LeaseSpec,
    expired: bool,
    leading: bool,
    me: &str,
    lease_seconds: i32,
    now: Timestamp,
) -> Verdict {
    match holder(old) {
        Some(h) if h != me && (leading || !expired) => Verdict::Held(h.to_string()),
        _ => Verdict::Write(claim(Some(old), me, lease_seconds, now)),
    }
}

/// The spec a candidate writes to take or keep the Lease: a renewal keeps
/// `acquireTime` and `leaseTransitions`, a change of holder bumps them.
pub(super) fn claim(old: Option<&LeaseSpec>, me: &str, lease_seconds: i32, now: Timestamp) -> LeaseSpec {
    let base = old.cloned().unwrap_or_default();
    let renewing = holder(&base) == Some(me);
    let transitions = base.lease_transitions.unwrap_or(0);
    LeaseSpec {
        holder_identity: Some(me.to_string()),
        lease_duration_seconds: Some(lease_seconds),
        acquire_time: match &base.acquire_time {
            Some(t) if renewing => Some(t.clone()),
            _ => Some(MicroTime(now)),
        },
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(if renewing || old.is_none() { transitions } else { transitions.saturating_add(1) }),
        ..base
    }
}

/// The spec a leader writes on shutdown (client-go's `release`): no holder,
/// one second left, transitions unchanged.
pub(super) fn released(old: &LeaseSpec, now: Timestamp) -> LeaseSpec {
    LeaseSpec {
        holder_identity: None,
        lease_duration_seconds: Some(1),
        acquire_time: Some(MicroTime(now)),
        renew_time: Some(MicroTime(now)),
        ..old.clone()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + seconds).unwrap()
    }

    fn config(lease: u64, renew: u64, retry: u64) -> LeaseConfig {
        LeaseConfig {
            lease_duration: Duration::from_millis(lease),
            renew_every: Duration::from_millis(renew),
            retry_every: Duration::from_millis(retry),
            ..LeaseConfig::new("ns", "me")
        }
    }

    fn held_by(holder: &str, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(15),
            acquire_time: Some(MicroTime(at(0))),
            renew_time: Some(MicroTime(at(5))),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn the_defaults_are_client_gos() {
        let t = timing(&LeaseConfig::new("ns", "me"));
        assert_eq!(t.lease_seconds, 15);
        assert_eq!(t.renew_every, Duration::from_secs(5));
        assert_eq!(t.retry_every, Duration::from_secs(2));
        assert_eq!(t.renew_deadline, Duration::from_secs(10));
    }

    #[test]
    fn timing_stays_safe_whatever_the_configuration() {
        // Sub-second and zero leases become one second; the renew period
        // leaves room before the deadline; nothing is zero.
        let t = timing(&config(0, 0, 0));
        assert_eq!(t.lease_seconds, 1);
        assert_eq!(t.renew_every, MIN_PERIOD);
        assert_eq!(t.retry_every, MIN_PERIOD);
        assert_eq!(t.renew_deadline, Duration::from_secs(1) - MIN_PERIOD);
        let t = timing(&config(1_500, 5_000, 100));
        assert_eq!(t.lease_seconds, 2);
        assert_eq!(t.renew_every, Duration::from_millis(500));
        assert_eq!(t.renew_deadline, Duration::from_millis(1_000));
        let t = timing(&config(u64::MAX, u64::MAX, u64::MAX));
        assert_eq!(t.lease_seconds, 24 * 3600);
        assert_eq!(t.retry_every, MAX_PERIOD);
    }

    #[test]
    fn expiry_counts_from_when_this_process_saw_the_spec() {
        let seen = Instant::now();
        let spec = held_by("other", 0);
        assert!(!expired(&spec, seen, seen + Duration::from_secs(14)));
        assert!(expired(&spec, seen, seen + Duration::from_secs(15)));
        let no_duration = LeaseSpec { lease_duration_seconds: None, ..spec.clone() };
        assert!(expired(&no_duration, seen, seen));
        let negative = LeaseSpec { lease_duration_seconds: Some(-3), ..spec };
        assert!(expired(&negative, seen, seen));
    }

    #[test]
    fn creating_starts_at_zero_transitions() {
        let spec = claim(None, "me", 15, at(9));
        assert_eq!(spec.holder_identity.as_deref(), Some("me"));
        assert_eq!(spec.lease_duration_seconds, Some(15));
        assert_eq!(spec.lease_transitions, Some(0));
        assert_eq!(spec.acquire_time, Some(MicroTime(at(9))));
        assert_eq!(spec.renew_time, Some(MicroTime(at(9))));
    }

    #[test]
    fn renewing_keeps_the_acquire_time_and_transitions() {
        let spec = claim(Some(&held_by("me", 4)), "me", 15, at(9));
        assert_eq!(spec.acquire_time, Some(MicroTime(at(0))));
        assert_eq!(spec.renew_time, Some(MicroTime(at(9))));
        assert_eq!(spec.lease_transitions, Some(4));
    }

    #[test]
    fn taking_over_bumps_transitions_and_the_acquire_time() {
        for old in [held_by("other", 4), released(&held_by("other", 4), at(6))] {
            let spec = claim(Some(&old), "me", 15, at(9));
            assert_eq!(spec.holder_identity.as_deref(), Some("me"));
            assert_eq!(spec.acquire_time, Some(MicroTime(at(9))));
            assert_eq!(spec.lease_transitions, Some(5));
            assert_eq!(spec.lease_duration_seconds, Some(15));
        }
    }

    #[test]
    fn a_valid_lease_of_another_holder_is_left_alone() {
        let old = held_by("other", 1);
        assert_eq!(decide(&old, false, false, "me", 15, at(9)), Verdict::Held("other".into()));
        assert!(matches!(decide(&old, true, false, "me", 15, at(9)), Verdict::Write(_)));
    }

    #[test]
    fn a_leader_that_sees_another_holder_steps_down_even_when_expired() {
        let old = held_by("other", 1);
        assert_eq!(decide(&old, true, true, "me", 15, at(9)), Verdict::Held("other".into()));
    }

    #[test]
    fn an_empty_or_own_lease_is_taken_at_once() {
        let empty = released(&held_by("other", 2), at(6));
        assert!(matches!(decide(&empty, false, false, "me", 15, at(9)), Verdict::Write(_)));
        let own = held_by("me", 2);
        assert!(matches!(decide(&own, false, false, "me", 15, at(9)), Verdict::Write(_)));
    }

    #[test]
    fn releasing_clears_the_holder_and_keeps_transitions() {
        let spec = released(&held_by("me", 3), at(9));
        assert_eq!(spec.holder_identity, None);
        assert_eq!(spec.lease_duration_seconds, Some(1));
        assert_eq!(spec.lease_transitions, Some(3));
        assert_eq!(spec.renew_time, Some(MicroTime(at(9))));
    }
}
