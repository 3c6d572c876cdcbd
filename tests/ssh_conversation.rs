//! A node's kept shell, in both dialects: one channel carries every script
//! of a node, round after round, and each script's output is exactly its
//! own. The posix shell is `/bin/sh -s`; the PowerShell session's exact
//! lines are parsed by the PowerShell grammar and run over real SSH by a
//! posix stand-in for `powershell.exe -Command -`
//! (tests/support/powershell_standin.rs), which runs posix bodies sent in
//! the PowerShell wrapping.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use support::fleet::TestFleet;
use winfleet::dialect::{self, Interpreter, Script, posix, powershell};
use winfleet::ssh::{KnownHosts, Pool, Settings, Target, Traffic, load_key};
use winfleet::vocab::Shell;

fn pool(fleet: &TestFleet) -> (Pool, Target) {
    // A line the stand-in does not know is never answered: fail soon.
    pool_within(fleet, Duration::from_secs(20))
}

fn pool_within(fleet: &TestFleet, command_timeout: Duration) -> (Pool, Target) {
    let pool = Pool::new(
        load_key(&fleet.key).unwrap(),
        KnownHosts::load(&fleet.known_hosts, false).unwrap(),
        Settings { command_timeout, ..Settings::default() },
    );
    let node = &fleet.nodes[0];
    (pool, Target { address: node.address.clone(), port: node.port, username: fleet.user.clone() })
}

/// `body` (posix) as `shell`'s dialect sends a script.
fn script(shell: Shell, body: &str) -> Script {
    match shell {
        Shell::Posix => Script { command: posix::COMMAND, input: format!("( {body}\n)\n") },
        Shell::Powershell => Script { command: powershell::COMMAND, input: powershell::wrap(body) },
    }
}

/// Bytes a script prints that look like framing: NULs, a marker of the
/// right shape but the wrong random part, no final newline.
const TRICKY: &str = r"printf 'a\000b\000winfleet-exchange-0123456789abcdef\000c'";
const TRICKY_OUT: &[u8] = b"a\0b\0winfleet-exchange-0123456789abcdef\0c";

async fn framing_holds(shell: Shell) {
    let fleet = TestFleet::start(1);
    support::powershell_standin::install(&fleet.nodes[0]);
    let (pool, target) = pool(&fleet);
    let interpreter = dialect::interpreter(shell);
    let mut shell_ = pool.converse(&target, interpreter).await.unwrap();
    let first = pool.exchange(&mut shell_, &script(shell, TRICKY), true).await.unwrap();
    assert_eq!(first.stdout, TRICKY_OUT, "{shell:?}: {}", String::from_utf8_lossy(&first.stderr));
    let second = pool.exchange(&mut shell_, &script(shell, "echo second; echo to-stderr >&2"), true).await.unwrap();
    assert_eq!(second.stdout, b"second\n", "{shell:?}: standard error stays out of the output");
    // A failing script ends nothing: the next one runs in the same shell.
    let failed = pool.exchange(&mut shell_, &script(shell, "echo before; false"), false).await.unwrap();
    assert_eq!(failed.stdout, b"before\n", "{shell:?}");
    // Standard error is its own SSH stream: sshd may send it after the
    // marker, so it is looked for in that exchange or the next.
    let stderr = String::from_utf8_lossy(&[second.stderr, failed.stderr].concat()).into_owned();
    assert!(stderr.starts_with("to-stderr\n"), "{shell:?}: {stderr:?}");
    // Kept for the next round, and found again without a new channel.
    pool.keep(shell_).await;
    let mut again = pool.converse(&target, interpreter).await.unwrap();
    assert!(again.reused(), "{shell:?}: the kept shell was not reused");
    let pid = pool.exchange(&mut again, &script(shell, "echo $PPID"), true).await.unwrap();
    assert!(!pid.stdout.is_empty(), "{shell:?}");
    pool.keep(again).await;
    let traffic = pool.activity.traffic();
    assert_eq!(traffic, Traffic { connections: 1, channels: 1, scripts: 4 }, "{shell:?}");
    assert_eq!(fleet.nodes[0].connections(), 1, "{shell:?}");
    pool.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_posix_shell_frames_every_script_exactly_and_is_kept() {
    framing_holds(Shell::Posix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_powershell_session_frames_every_script_exactly_and_is_kept() {
    framing_holds(Shell::Powershell).await;
}

/// A kept shell that died between rounds is replaced once for an
/// observation (idempotent); an apply is never sent twice.
async fn a_dead_shell_is_replaced_only_for_an_observation(shell: Shell) {
    let fleet = TestFleet::start(1);
    support::powershell_standin::install(&fleet.nodes[0]);
    let (pool, target) = pool(&fleet);
    let interpreter = dialect::interpreter(shell);
    let mut kept = pool.converse(&target, interpreter).await.unwrap();
    pool.exchange(&mut kept, &script(shell, "true"), true).await.unwrap();
    // The shell's process is killed by the next script: as if it had died.
    let kill = "echo ran >> ran; kill -9 $(cat shell.pid 2>/dev/null || echo 0)";
    let record = match shell {
        Shell::Posix => "echo $$ > shell.pid",
        Shell::Powershell => "echo $PPID > shell.pid",
    };
    pool.exchange(&mut kept, &script(shell, record), true).await.unwrap();
    let apply = pool.exchange(&mut kept, &script(shell, kill), false).await.unwrap();
    assert!(apply.stdout.is_empty() && kept.ended(), "{shell:?}: the shell survived");
    assert_eq!(fleet.nodes[0].read("ran").unwrap(), "ran\n", "{shell:?}: the apply ran once");
    pool.keep(kept).await;

    let mut fresh = pool.converse(&target, interpreter).await.unwrap();
    assert!(!fresh.reused(), "{shell:?}: a dead shell was kept");
    pool.exchange(&mut fresh, &script(shell, record), true).await.unwrap();
    // An observation that kills its shell is sent once more, in a new
    // shell, where the pid file names the dead one: it runs whole there.
    // (The script goes on after the kill, so it prints only when the kill
    // failed: a shell that printed part of a script is not retried.)
    let observe = "echo ran >> ran; kill -9 $(cat shell.pid) 2>/dev/null || echo observed";
    let observed = pool.exchange(&mut fresh, &script(shell, observe), true).await.unwrap();
    assert_eq!(observed.stdout, b"observed\n", "{shell:?}");
    assert_eq!(fleet.nodes[0].read("ran").unwrap(), "ran\nran\nran\n", "{shell:?}: one apply, two tries");
    assert_eq!(pool.activity.traffic().channels, 3, "{shell:?}: a shell, its replacement, the retry's");
    pool.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_posix_shell_is_replaced_only_for_an_observation() {
    a_dead_shell_is_replaced_only_for_an_observation(Shell::Posix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_powershell_session_is_replaced_only_for_an_observation() {
    a_dead_shell_is_replaced_only_for_an_observation(Shell::Powershell).await;
}

/// A script that reads standard input gets the session's, as a native
/// program does under `-Command -` (docs/powershell-session.md): it takes
/// winfleet's end line or waits for it. That costs its own exchange only:
/// it times out, the session is closed, and the next script runs whole in
/// a new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_powershell_script_that_reads_standard_input_times_out_alone_and_the_next_runs_in_a_new_session() {
    let fleet = TestFleet::start(1);
    support::powershell_standin::install(&fleet.nodes[0]);
    let (pool, target) = pool_within(&fleet, Duration::from_secs(3));
    let interpreter = dialect::interpreter(Shell::Powershell);
    let mut kept = pool.converse(&target, interpreter).await.unwrap();
    pool.exchange(&mut kept, &script(Shell::Powershell, "echo ready"), true).await.unwrap();
    let reads = script(Shell::Powershell, "head -c 1 >/dev/null; echo read >> read");
    let error = pool.exchange(&mut kept, &reads, false).await.unwrap_err();
    assert!(error.to_string().contains("running a script"), "{error}");
    assert!(kept.ended(), "a session whose script timed out is over");
    pool.keep(kept).await;
    let mut fresh = pool.converse(&target, interpreter).await.unwrap();
    assert!(!fresh.reused(), "the timed-out session was kept");
    let next = pool.exchange(&mut fresh, &script(Shell::Powershell, "echo next"), true).await.unwrap();
    assert_eq!(next.stdout, b"next\n");
    pool.close().await;
}

#[test]
fn the_powershell_end_line_is_one_line_of_powershell_that_carries_the_marker_as_base64() {
    let marker = b"\0winfleet-exchange-00ff00ff00ff00ff\0";
    let line = (powershell::INTERPRETER.end_line)(marker);
    assert!(line.ends_with("\r\n") && line.matches('\n').count() == 1, "{line:?}");
    assert!(!line.contains("winfleet-exchange"), "the marker's bytes must not be sent as they are");
    let checked = support::powershell::assert_valid("end line", &line);
    assert_eq!(checked.decoded, vec![String::from_utf8(marker.to_vec()).unwrap()]);
    let posix = (posix::INTERPRETER.end_line)(marker);
    assert!(!posix.contains("winfleet-exchange"), "{posix}");
    let Interpreter { command, .. } = dialect::interpreter(Shell::Powershell);
    assert_eq!(command, powershell::COMMAND);
}
