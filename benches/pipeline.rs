//! Benchmark: validate + render + plan on a generated repository with
//! 10,000 instances and 500 mirror entries (goal: at most 70 ms and 64 MiB
//! peak RSS when a pull request changes one file).
//!
//! Run with `cargo bench --bench pipeline`. The parent generates a real Git
//! repository (base; head with one mirror changed; then every file
//! changed), then runs each measurement in a fresh child process (this
//! binary with `--child`), so the peak RSS (VmHWM) is the pipeline's own
//! and not the generator's. Three cases side by side: one file changed,
//! the same with each revision read and checked alone (today's path before
//! issue 39: only the parse of unchanged files shared), and every file
//! changed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, missing_docs)]

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use winfleet::desired::{LoadOptions, load_many, load_many_checking_each};
use winfleet::plan::offline;
use winfleet::source::{read_revision, read_revisions};

const INSTANCES: usize = 10_000;
const MIRROR_ENTRIES: usize = 500;
const RUNS: usize = 7;

/// The product's allocator (src/main.rs), so the figures are `winfleet plan`'s.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// What a run measures: the revisions planned, and how they are loaded.
#[derive(Clone, Copy)]
struct Case {
    name: &'static str,
    base: &'static str,
    head: &'static str,
    /// Each revision is read and checks every file itself (the path before
    /// unchanged files' reads and checks were shared).
    alone: bool,
}

const CASES: [Case; 3] = [
    Case { name: "one file changed", base: "HEAD~2", head: "HEAD~1", alone: false },
    Case {
        name: "one file changed, each revision read and checked alone (before)",
        base: "HEAD~2",
        head: "HEAD~1",
        alone: true,
    },
    Case { name: "every file changed", base: "HEAD~2", head: "HEAD", alone: false },
];

type Sample = (f64, f64, f64, u64, [u64; 3], f64);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        let case = args.get(i + 2).and_then(|c| c.parse::<usize>().ok()).unwrap_or(0);
        child(Path::new(&args[i + 1]), CASES[case]);
        return;
    }
    // `--generate DIR` only writes the repository, for a profiler to run
    // `--child DIR [CASE]` on (valgrind --tool=massif or callgrind).
    if let Some(i) = args.iter().position(|a| a == "--generate") {
        generate(Path::new(&args[i + 1]));
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    generate(dir.path());
    let exe = std::env::current_exe().expect("own path");
    // The cases take turns, so a busy machine weighs on each alike.
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); CASES.len()];
    for _ in 0..RUNS {
        for (c, runs) in samples.iter_mut().enumerate() {
            let out =
                Command::new(&exe).arg("--child").arg(dir.path()).arg(c.to_string()).output().expect("child runs");
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            let text = String::from_utf8_lossy(&out.stdout);
            let f: Vec<&str> = text.split_whitespace().collect();
            let stages = [f[4].parse().unwrap(), f[5].parse().unwrap(), f[6].parse().unwrap()];
            runs.push((
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
                f[3].parse().unwrap(),
                stages,
                f[7].parse().unwrap(),
            ));
        }
    }
    println!(
        "repository: {INSTANCES} instances, {MIRROR_ENTRIES} mirror entries; {RUNS} runs of each case, each in a fresh process"
    );
    println!(
        "validate+render+plan (two revisions from Git, plan between them; goal <= 70 ms and <= 64 MiB with one file changed):"
    );
    for (case, mut runs) in CASES.iter().zip(samples) {
        report(case, &mut runs);
    }
    readers(dir.path());
}

fn report(case: &Case, samples: &mut [Sample]) {
    samples.sort_by(|a, b| a.0.total_cmp(&b.0));
    let median = samples[RUNS / 2];
    let best = samples[0];
    let peak = samples.iter().map(|s| s.3).max().unwrap_or(0);
    let mib = |kib: u64| kib as f64 / 1024.0;
    println!("  {}:", case.name);
    println!("    total median {:7.1} ms   best {:7.1} ms   peak RSS {:6.1} MiB", median.0, best.0, mib(peak));
    println!(
        "      of which read both revisions from Git {:6.1} ms (libgit2's start-up {:.1} ms of it), validate+render both {:6.1} ms (medians)",
        median.1, median.5, median.2
    );
    let [start, read, load] = median.4;
    println!(
        "      peak after each stage (median run): start {:.1}, read {:.1}, validate+render {:.1}, plan {:.1} MiB",
        mib(start),
        mib(read),
        mib(load),
        mib(median.3)
    );
}

/// The YAML readers side by side on the head revision's files: the fast
/// reader over the event stream against serde-saphyr building the same
/// values, and the parser's event stream alone. Medians of RUNS.
fn readers(dir: &Path) {
    use winfleet::desired::yaml::{parse_documents_fast, parse_documents_upstream};
    let mut files = Vec::new();
    for sub in ["instances", "mirrors"] {
        for entry in std::fs::read_dir(dir.join(sub)).unwrap() {
            files.push(std::fs::read_to_string(entry.unwrap().path()).unwrap());
        }
    }
    let time = |f: &dyn Fn(&str) -> usize| {
        let mut samples: Vec<f64> = (0..RUNS)
            .map(|_| {
                let start = Instant::now();
                let documents: usize = files.iter().map(|t| f(t)).sum();
                assert_eq!(documents, files.len());
                start.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        samples.sort_by(f64::total_cmp);
        samples[RUNS / 2]
    };
    let upstream = time(&|t| parse_documents_upstream("f.yaml", t).unwrap().len());
    let fast = time(&|t| parse_documents_fast(t).unwrap().len());
    let events = time(&|t| {
        use serde_saphyr::granit_parser::{Event, Parser};
        Parser::new_from_str(t).filter(|e| matches!(e, Ok((Event::DocumentEnd, _)))).count()
    });
    let bytes: usize = files.iter().map(String::len).sum();
    println!(
        "YAML reading, one revision ({} files, {:.1} MB): serde-saphyr {upstream:.1} ms, winfleet's reader {fast:.1} ms ({:.1}x); \
         the parser's events alone (the floor of any reader on it) {events:.1} ms",
        files.len(),
        bytes as f64 / 1e6,
        upstream / fast
    );
}

/// One measured run: prints total_ms read_ms load_ms vmhwm_kib, the peaks
/// after each stage, and libgit2's start-up in ms (part of read_ms).
fn child(repo: &Path, case: Case) {
    let start = Instant::now();
    let hwm_read_start = hwm_kib();
    // libgit2's one-time start-up (OpenSSL loads the system's CA bundle),
    // timed apart: a fixed cost of any process that reads Git.
    git2::Repository::discover(repo).expect("repository");
    let git_init = start.elapsed();
    let (base, head) = if case.alone {
        std::thread::scope(|s| {
            let base = s.spawn(|| read_revision(repo, case.base).expect("base"));
            (base.join().expect("base thread"), read_revision(repo, case.head).expect("head"))
        })
    } else {
        let mut read = read_revisions(repo, &[case.base, case.head]).expect("repository").into_iter();
        let mut next = || read.next().expect("revision").expect("readable");
        (next(), next())
    };
    let read = start.elapsed();
    let hwm_read = hwm_kib();
    let load = if case.alone { load_many_checking_each } else { load_many };
    let mut both = load(&[&base, &head], LoadOptions::default());
    let (head, base) = (both.pop().expect("head"), both.pop().expect("base"));
    let loaded = start.elapsed();
    let hwm_load = hwm_kib();
    let (base, head) = (base.desired.expect("base valid"), head.desired.expect("head valid"));
    let plan = offline::plan(Some(&base), &head);
    let total = start.elapsed();
    assert_eq!(plan.changed_nodes(), INSTANCES, "one mirror changed on every node");
    let hwm = hwm_kib();
    println!(
        "{} {} {} {hwm} {hwm_read_start} {hwm_read} {hwm_load} {}",
        total.as_secs_f64() * 1e3,
        read.as_secs_f64() * 1e3,
        (loaded - read).as_secs_f64() * 1e3,
        git_init.as_secs_f64() * 1e3
    );
}

/// The peak RSS so far (VmHWM), KiB.
fn hwm_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn generate(dir: &Path) {
    let write = |rel: &str, text: String| {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    // 2,000 instances in WMCO's ConfigMap, 8,000 in eight WindowsInstanceLists.
    let mut cm = String::from("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: windows-instances\ndata:\n");
    for i in 0..2000 {
        cm.push_str(&format!("  10.{}.{}.{}: |-\n    username=Administrator\n", i / 65536, (i / 256) % 256, i % 256));
    }
    write("instances/windows-instances.yaml", cm);
    for f in 0..8 {
        let mut list = format!(
            "apiVersion: winfleet.io/v1alpha1\nkind: WindowsInstanceList\nmetadata:\n  name: team{f}\nspec:\n  instances:\n"
        );
        for i in 0..1000 {
            list.push_str(&format!(
                "  - address: win{f}-{i:04}.corp.example\n    username: Administrator\n    labels: {{example.com/team: team{f}}}\n"
            ));
        }
        write(&format!("instances/team{f}.yaml"), list);
    }
    write("fleet.yaml", "apiVersion: winfleet.io/v1alpha1\nkind: Fleet\nmetadata:\n  name: bench\nspec:\n  prune: {maxRemovalPercent: 10}\n".into());
    let mirrors = |changed: bool| {
        for f in 0..10 {
            let mut idms = format!(
                "apiVersion: config.openshift.io/v1\nkind: ImageDigestMirrorSet\nmetadata:\n  name: set{f}\nspec:\n  imageDigestMirrors:\n"
            );
            for e in 0..MIRROR_ENTRIES / 10 {
                let n = f * 50 + e;
                let m = if changed && n == 0 { "mirror-b" } else { "mirror-a" };
                idms.push_str(&format!(
                    "  - source: reg{}.example.com/team{n}/app\n    mirrors:\n    - {m}.corp.example:5000/team{n}/app\n    - backup.corp.example/r/team{n}/app\n",
                    n % 100
                ));
            }
            write(&format!("mirrors/set{f}.yaml"), idms);
        }
    };
    let git = |args: &[&str]| {
        let ok = Command::new("git").args(args).current_dir(dir).output().expect("git runs").status.success();
        assert!(ok, "git {args:?}");
    };
    mirrors(false);
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["-c", "user.name=bench", "-c", "user.email=bench@winfleet.invalid", "commit", "-qm", "base"]);
    mirrors(true);
    git(&["add", "-A"]);
    git(&["-c", "user.name=bench", "-c", "user.email=bench@winfleet.invalid", "commit", "-qm", "head"]);
    // Every file changed: a comment line on top of each (the same mirror changed).
    for sub in ["instances", "mirrors"] {
        for entry in std::fs::read_dir(dir.join(sub)).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            std::fs::write(&path, format!("# every file changed\n{text}")).unwrap();
        }
    }
    let fleet = std::fs::read_to_string(dir.join("fleet.yaml")).unwrap();
    std::fs::write(dir.join("fleet.yaml"), format!("# every file changed\n{fleet}")).unwrap();
    git(&["add", "-A"]);
    git(&["-c", "user.name=bench", "-c", "user.email=bench@winfleet.invalid", "commit", "-qm", "every file"]);
}
