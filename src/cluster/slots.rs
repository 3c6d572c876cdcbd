//! Work on nodes a few at a time: at most `slots` running at once, in the
//! given order; no new one starts once winfleet is stopping or a finished
//! one says the rest must wait.

use std::collections::VecDeque;
use std::future::Future;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio_util::sync::CancellationToken;

/// How a slotted run ended.
pub struct Slotted<I, R> {
    /// What finished, in finishing order.
    pub done: Vec<R>,
    /// What never started, in order.
    pub waiting: Vec<I>,
    /// Why they never started (empty when every item started).
    pub reason: String,
}

/// Runs `start` on `items`, at most `slots` at once. `held` is why none may
/// start at all (another disruption holds the slots); `stopping` is said of
/// the rest when `cancel` fires; `halts` tells from a finished item's
/// report that no other may start (a node that did not come back).
pub async fn run<I, R, Fut>(
    slots: usize,
    items: Vec<I>,
    held: Option<String>,
    (cancel, stopping): (&CancellationToken, &str),
    start: impl Fn(I) -> Fut,
    halts: impl Fn(&R) -> Option<String>,
) -> Slotted<I, R>
where
    Fut: Future<Output = R>,
{
    let mut stopped = held.or_else(|| (slots == 0).then(String::new));
    let mut queue: VecDeque<I> = items.into();
    let mut running = FuturesUnordered::new();
    let mut done = Vec::new();
    loop {
        while running.len() < slots && stopped.is_none() {
            if cancel.is_cancelled() {
                stopped = Some(stopping.to_owned());
                break;
            }
            let Some(item) = queue.pop_front() else { break };
            running.push(start(item));
        }
        let Some(report) = running.next().await else { break };
        if let Some(why) = halts(&report) {
            stopped.get_or_insert(why);
        }
        done.push(report);
    }
    Slotted { done, waiting: queue.into(), reason: stopped.unwrap_or_default() }
}
