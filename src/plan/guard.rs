//! The mass-removal guard over instances, shared by the offline plan (what
//! a pull request would do) and the round (what winfleet does): more than
//! `prune.maxRemovalPercent` of the instances (those listed and those
//! leaving) leaving at once is refused as a whole. Pure.

/// Why every deconfigure is held back, or `None` when they may run.
pub fn removal_guard(listed: usize, leaving: usize, max_percent: u32) -> Option<String> {
    let total = listed + leaving;
    if leaving == 0 || leaving * 100 <= max_percent as usize * total {
        return None;
    }
    Some(format!(
        "this commit would deconfigure {leaving} of {total} instances ({}%), more than prune.maxRemovalPercent \
         ({max_percent}%): nobody is deconfigured until a commit restores the instances or raises the limit",
        leaving * 100 / total
    ))
}
