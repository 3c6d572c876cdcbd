use super::*;
use crate::engine::report::{LifecycleReport, NodeReport, NodeResult};
use crate::lifecycle::Mode;
use crate::reconcile::report::ClusterReport;

/// A round of `nodes` nodes and one whose lifecycle is blocked for
/// `reason` (the summary names it), with a cluster part.
fn round(nodes: usize, reason: &str) -> RoundReport {
    let node = |address: &str| NodeReport {
        result: NodeResult::Done { operations: Vec::new(), in_sync: 3, reboot_required: false },
        ..NodeReport::new(address)
    };
    let mut reports: Vec<NodeReport> = (0..nodes).map(|i| node(&format!("10.0.{}.{}", i / 256, i % 256))).collect();
    let lifecycle = LifecycleReport {
        mode: Mode::Join,
        version: "v1".into(),
        waiting: Vec::new(),
        error: Some(reason.to_owned()),
        uploaded_bytes: 0,
        reboot_first: false,
    };
    reports.push(NodeReport { lifecycle: Some(lifecycle), ..node("10.9.9.9") });
    let cluster = ClusterReport { api: "https://api.example:6443".into(), ..ClusterReport::default() };
    RoundReport { dry_run: true, nodes: reports, cluster: Some(cluster) }
}

/// Code fences open and closed in pairs (the same fence closes the block).
fn fences_balance(markdown: &str) -> bool {
    let fences: Vec<&str> = markdown.lines().filter(|l| l.starts_with("```")).collect();
    fences.len().is_multiple_of(2) && fences.chunks(2).all(|p| p[0].trim_end_matches("text") == p[1])
}

#[test]
fn a_whole_report_has_its_summaries_first_then_the_whole_text_in_a_code_block() {
    let report = round(2, "connection refused");
    let markdown = report.render_markdown(60_000);
    assert!(markdown.starts_with(&format!("{MARKER}\n")), "{markdown}");
    let summaries = report.summary_lines();
    assert_eq!(summaries.len(), 2, "{summaries:?}");
    assert!(summaries[0].starts_with("Dry run: 3 node(s)") && summaries[1].starts_with("Cluster plan:"));
    let code = markdown.find("```text\n").unwrap();
    for line in &summaries {
        let at = markdown.find(&format!("**{}**", escape(line))).unwrap_or_else(|| panic!("{line}: {markdown}"));
        assert!(at < code, "the summary comes before the detail: {markdown}");
    }
    assert!(markdown.contains(&report.render_text()), "{markdown}");
    assert!(!markdown.contains("shortened"), "{markdown}");
    assert!(fences_balance(&markdown), "{markdown}");
}

#[test]
fn a_long_report_is_cut_between_lines_within_the_budget_and_keeps_its_summaries_and_says_so() {
    let report = round(300, "connection refused");
    let text = report.render_text();
    for max in [MIN_MAX_BYTES, 1_500, 4_000, 9_999] {
        let markdown = report.render_markdown(max);
        assert!(markdown.len() <= max, "{} > {max}: {markdown}", markdown.len());
        assert!(markdown.starts_with(&format!("{MARKER}\n")));
        for line in report.summary_lines() {
            assert!(markdown.contains(&format!("**{}**", escape(&line))), "{max}: {markdown}");
        }
        assert!(fences_balance(&markdown), "{markdown}");
        let block = markdown.split("```text\n").nth(1).unwrap().split("```\n").next().unwrap();
        assert!(text.starts_with(block) && (block.is_empty() || block.ends_with('\n')), "cut between lines: {block}");
        let left = text[block.len()..].lines().count();
        match max {
            9_999 => assert!(left == 0 && !markdown.contains("shortened"), "the whole fits: {markdown}"),
            _ => assert!(markdown.contains(&format!("the report's last {left} line(s) are left out")), "{markdown}"),
        }
    }
    // A smaller budget is taken as the smallest.
    assert_eq!(report.render_markdown(10), report.render_markdown(MIN_MAX_BYTES));
}

#[test]
fn backticks_in_the_report_get_a_longer_fence_and_markdown_in_a_summary_is_taken_literally() {
    let report = round(1, "```\n<b>*bold*</b> `x` | y");
    let markdown = report.render_markdown(60_000);
    assert!(markdown.contains("\n````text\n") && markdown.ends_with("\n````\n"), "{markdown}");
    assert!(fences_balance(&markdown), "{markdown}");
    assert!(markdown.contains(r"\<b\>\*bold\*\</b\> \`x\` \| y"), "{markdown}");
}

#[test]
fn a_summary_longer_than_the_budget_is_shortened_and_the_comment_still_fits() {
    let report = round(1, &"a very long reason ".repeat(200));
    let markdown = report.render_markdown(MIN_MAX_BYTES);
    assert!(markdown.len() <= MIN_MAX_BYTES, "{}: {markdown}", markdown.len());
    assert!(markdown.contains("…**\n"), "{markdown}");
    assert!(markdown.contains("**Cluster plan:"), "{markdown}");
    assert!(fences_balance(&markdown), "{markdown}");
}

#[test]
fn a_cut_never_leaves_half_an_escape() {
    assert_eq!(shorten(r"ab\*cdef", 6), "ab…");
    assert_eq!(shorten(r"a\\*cdef", 6), r"a\\…");
    assert_eq!(shorten("abc", 3), "abc");
}

#[test]
fn a_run_of_backticks_too_long_for_a_fence_is_shown_as_quotes_within_the_budget() {
    let report = round(1, &"`".repeat(2_000));
    let markdown = report.render_markdown(MIN_MAX_BYTES);
    assert!(markdown.len() <= MIN_MAX_BYTES, "{}: {markdown}", markdown.len());
    assert!(markdown.contains("\n```text\n") && fences_balance(&markdown), "{markdown}");
}
