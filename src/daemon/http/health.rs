//! What `/healthz` answers: 200 while the daemon's loop makes progress,
//! 503 with the reason once it has not for longer than its timers allow
//! (a wedged loop), so the kubelet restarts the container.
//!
//! The loop says what it is doing. Waiting, it names when it will wake
//! (its next poll, retry or timer): it is healthy until `allowance` past
//! that. Working (a round, a fetch), it is healthy while something moves:
//! an SSH operation finishing on any node (the pool's [`Activity`]) or the
//! loop itself saying so, at most `allowance` apart. The allowance is above
//! the longest single wait a healthy round has (see [`allowance`]): with
//! the defaults, the 15-minute reboot timeout, so 16 minutes.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::ssh::{Activity, Settings};

/// What the loop is doing.
#[derive(Clone, Copy, Debug)]
enum Doing {
    /// Waiting until this instant at the latest.
    Waiting(Instant),
    /// Working; the last progress seen, and the activity count then.
    Working(Instant, u64),
}

/// The loop's liveness, shared with the `/healthz` handler.
#[derive(Debug)]
pub struct Liveness {
    allowance: Duration,
    activity: Activity,
    doing: Mutex<Doing>,
}

impl Liveness {
    /// A loop that has just started working; `activity` is the SSH pool's.
    pub fn new(allowance: Duration, activity: Activity) -> Self {
        let doing = Doing::Working(Instant::now(), activity.finished());
        Self { allowance, activity, doing: Mutex::new(doing) }
    }

    /// The loop waits, and wakes by `deadline` at the latest.
    pub fn waiting_until(&self, deadline: Instant) {
        self.set(Doing::Waiting(deadline));
    }

    /// The loop works (a round, a fetch): progress now.
    pub fn working(&self) {
        self.set(Doing::Working(Instant::now(), self.activity.finished()));
    }

    fn set(&self, doing: Doing) {
        if let Ok(mut now) = self.doing.lock() {
            *now = doing;
        }
    }

    /// `Ok` while the loop makes progress; else why not.
    pub fn check(&self, now: Instant) -> Result<(), String> {
        let Ok(mut doing) = self.doing.lock() else { return Err("the liveness record is poisoned".into()) };
        let allowance = self.allowance.as_secs();
        match *doing {
            Doing::Waiting(deadline) if now > deadline + self.allowance => Err(format!(
                "wedged: the loop was due to wake {}s ago (allowance {allowance}s)",
                now.duration_since(deadline).as_secs()
            )),
            Doing::Waiting(_) => Ok(()),
            Doing::Working(since, seen) => {
                let finished = self.activity.finished();
                if finished != seen {
                    *doing = Doing::Working(now, finished);
                    return Ok(());
                }
                let idle = now.duration_since(since);
                if idle > self.allowance {
                    Err(format!(
                        "wedged: the round has made no progress for {}s (no SSH operation finished; allowance {allowance}s)",
                        idle.as_secs()
                    ))
                } else {
                    Ok(())
                }
            }
        }
    }
}

/// The default allowance: the longest a healthy round goes without an SSH
/// operation finishing (a command's timeout after the connection's retries,
/// or one of the round's other `waits`: a drain, a reboot, a join's
/// registration or readiness, a Git operation), plus a minute.
pub fn allowance(ssh: &Settings, waits: &[Duration]) -> Duration {
    let tries = ssh.retries.saturating_add(1);
    let backoff = ssh.backoff.saturating_mul(2u32.saturating_pow(ssh.retries));
    let connect = ssh.connect_timeout.saturating_mul(tries).saturating_add(backoff);
    let longest = waits.iter().copied().fold(connect.saturating_add(ssh.command_timeout), Duration::max);
    longest.saturating_add(Duration::from_secs(60))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiting_is_healthy_until_the_allowance_past_the_wake() {
        let live = Liveness::new(Duration::from_secs(10), Activity::default());
        let start = Instant::now();
        live.waiting_until(start + Duration::from_secs(60));
        assert!(live.check(start + Duration::from_secs(70)).is_ok());
        let late = live.check(start + Duration::from_secs(71)).unwrap_err();
        assert!(late.contains("due to wake 11s ago"), "{late}");
    }

    #[test]
    fn the_default_allowance_is_the_longest_wait_plus_a_minute() {
        let ssh = Settings::default();
        let waits = [Duration::from_secs(600), Duration::from_secs(900)];
        assert_eq!(allowance(&ssh, &waits), Duration::from_secs(960));
        // 15 s x 3 tries + 2 s of back-off + the 120 s command timeout.
        assert_eq!(allowance(&ssh, &[]), Duration::from_secs(45 + 2 + 120 + 60));
        let huge = Settings { retries: u32::MAX, ..Settings::default() };
        assert!(allowance(&huge, &waits) > Duration::from_secs(960), "saturates, never panics");
    }

    #[test]
    fn working_is_healthy_while_the_loop_says_so_within_the_allowance() {
        let live = Liveness::new(Duration::from_secs(10), Activity::default());
        let start = Instant::now();
        live.working();
        assert!(live.check(start).is_ok());
        let stuck = live.check(start + Duration::from_secs(11)).unwrap_err();
        assert!(stuck.contains("no progress for 1"), "{stuck}");
    }
}
