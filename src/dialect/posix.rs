//! The posix dialect: POSIX `sh` with coreutils (`base64`, `sha256sum`,
//! `mkdir`, `mv`, `rm`), run as `/bin/sh -s` with the script on standard
//! input. Files and directories are created owner-only (`umask 077`):
//! hosts.toml may carry registry credentials. Few processes per node, as a
//! process costs more than anything else a round does on a node: a script
//! decodes all its values with one `base64 -d` of a here-document (an
//! apply or preparation cuts them apart with the shell's field splitting:
//! [`super::posix_values`]; a content holding NUL, which no shell variable
//! can, gets a decode of its own), the
//! shell's `printf` writes a file, and a file is written without re-reading
//! the old one (the plan compared SHA-256 sums a moment before; PowerShell,
//! where it costs nothing, does re-check and reports "unchanged").
//!
//! The whole script is one function called on its last line, so a script
//! cut off in transit is a syntax error and runs nothing. It runs in a
//! subshell (a fork, no exec), because the shell is kept for the node's
//! next scripts, of this round and later ones: nothing a script sets
//! (variables, umask, options) outlives it. Inside it, no
//! command reads standard input. Files are written to a temporary file in
//! the same directory and renamed over the target, so a reader (containerd)
//! sees the old file or the new one, never a part.

use std::fmt::Write;

use super::posix_lifecycle::{self, ObserveList};
use super::posix_lifecycle_apply;
use super::posix_values::Values;
use super::{Interpreter, Script, b64, env_indexes};
use crate::lifecycle::change::LifecycleChange;
use crate::node::facts::{FACTS_MARKER, FACTS_VERSION, NodeFacts};
use crate::node::outcome::{OUTCOMES_MARKER, OUTCOMES_VERSION};
use crate::node::plan::{Change, is_entry_name};
use crate::node::{ENVIRONMENT_DROP_IN, HOSTS_TOML, NodeSpec, REGISTRY_MARKER_TEXT};

/// The command line of both scripts.
pub const COMMAND: &str = "/bin/sh -s";

/// The kept shell: `/bin/sh -s` reading one script after another.
pub const INTERPRETER: Interpreter = Interpreter { command: COMMAND, end_line };

/// The line after each script: `printf` of the marker in octal escapes
/// (the shell turns them into its bytes, NULs included).
pub fn end_line(marker: &[u8]) -> String {
    let mut line = String::with_capacity(marker.len() * 4 + 10);
    line.push_str("printf '");
    for &b in marker {
        let _ = write!(line, "\\{b:03o}");
    }
    line.push_str("'\n");
    line
}

const PRELUDE: &str = r#"main() {
umask 077
t() { printf '%s\0' "$@"; }
d() { base64 -d <<WINFLEET_B64
$1
WINFLEET_B64
}
"#;

const EPILOGUE: &str = "t end\n}\n(main) </dev/null\n";

/// Observation: host name, OS, boot id, registry directories with the
/// SHA-256 of their hosts.toml, the environment drop-in, service states.
pub fn observe(spec: &NodeSpec, lifecycle: Option<&ObserveList>) -> Script {
    let env_file = spec.environment_dir.as_deref().map(|dir| format!("{dir}/{ENVIRONMENT_DROP_IN}"));
    let mut values = Values::default();
    values.push(spec.registries_dir.as_str());
    values.push(env_file.unwrap_or_default());
    // Service names cannot hold a newline (validation): one line each.
    values.push(spec.services.iter().map(|service| format!("{service}\n")).collect::<String>());
    let lifecycle = match (&spec.lifecycle, lifecycle) {
        (Some(spec), Some(list)) => posix_lifecycle::observe(spec, list, &mut values),
        _ => String::new(),
    };
    let mut s = PRELUDE.to_owned();
    s.push_str(&values.render());
    s.push_str("nl='\n'\nn; reg=$val; n; envf=$val; n; inp=$val\n");
    let _ = writeln!(s, "t {FACTS_MARKER} {FACTS_VERSION}");
    s.push_str(
        r#"if IFS= read -r h </proc/sys/kernel/hostname 2>/dev/null; then :; else h=$(uname -n); fi
t hostname "$h"
if IFS= read -r r </proc/sys/kernel/osrelease 2>/dev/null; then t os "Linux $r"; else t os "$(uname -sr)"; fi
if IFS= read -r b </proc/sys/kernel/random/boot_id 2>/dev/null; then t boot "$b"; fi
set --
for p in "$reg"/*/; do
  [ -d "$p" ] || continue
  n=${p%/}; n=${n##*/}
  t dir "$n"
  if [ -L "${p%/}" ]; then t link "$n"; continue; fi
  if [ -f "${p}.winfleet-managed" ] && [ ! -L "${p}.winfleet-managed" ]; then
    t mark "$n"
    for e in "$p"* "$p".[!.]* "$p"..?*; do
      [ -e "$e" ] || [ -L "$e" ] || continue
      case ${e##*/} in hosts.toml | .winfleet-managed | .hosts.toml.winfleet-tmp) [ -f "$e" ] && [ ! -L "$e" ] && continue ;; esac
      t unmanaged "$n" "${e##*/}"
    done
  fi
  if [ -f "${p}hosts.toml" ]; then set -- "$@" "${p}hosts.toml"; fi
done
if [ "$#" -gt 0 ]; then t sums; sha256sum -z -- "$@" 2>/dev/null; t end-sums; fi
if [ -n "$envf" ] && [ -f "$envf" ]; then
  c=
  while IFS= read -r l || [ -n "$l" ]; do c="$c$l$nl"; done <"$envf"
  t envfile "$c"
fi
if [ -d /run/systemd/system ]; then
  while [ -n "$inp" ]; do
    s=${inp%%"$nl"*}; inp=${inp#*"$nl"}
    st=$(systemctl is-active -- "$s" 2>/dev/null)
    t service "$s" "${st:-unknown}"
  done
fi
"#,
    );
    s.push_str(&lifecycle);
    s.push_str(EPILOGUE);
    Script { command: COMMAND, input: s }
}

/// The preparation script of the lifecycle changes (directories and upload
/// staging), when there is anything to prepare.
pub fn prepare(spec: &NodeSpec, lifecycle: &[(usize, &LifecycleChange<'_>)]) -> Option<Script> {
    let (body, values) = posix_lifecycle_apply::prepare(spec.lifecycle.as_deref()?, lifecycle)?;
    let mut s = PRELUDE.to_owned();
    s.push_str(APPLY_HELPERS);
    s.push_str(&values.render());
    let _ = writeln!(s, "t {OUTCOMES_MARKER} {OUTCOMES_VERSION}");
    s.push_str(&body);
    s.push_str(EPILOGUE);
    Some(Script { command: COMMAND, input: s })
}

/// Apply: one line per change, each reporting its outcome; the environment
/// changes are one write of the drop-in, sharing its outcome.
pub fn apply(
    spec: &NodeSpec,
    facts: &NodeFacts,
    changes: &[Change<'_>],
    lifecycle: &[(usize, &LifecycleChange<'_>)],
) -> Script {
    let mut s = PRELUDE.to_owned();
    s.push_str(APPLY_HELPERS);
    s.push_str(
        r#"f() {
  dir=${target%/*}; tmp="$dir/.${target##*/}.winfleet-tmp"
  if [ ! -d "$dir" ] && ! err=$(mkdir -p -- "$dir" 2>&1); then o failed "$err"; return; fi
  if [ -L "$tmp" ]; then o failed "not written: $tmp is a symbolic link, not winfleet's"; return; fi
  if [ -f "$tmp" ] && ! err=$(rm -f -- "$tmp" 2>&1); then o failed "$err"; return; fi
  set -C; "$1" 2>/dev/null; rc=$?; set +C
  if [ "$rc" -ne 0 ]; then err=$( { : >>"$tmp"; } 2>&1 ); o failed "${err:-cannot write $tmp}"; return; fi
  if err=$(mv -f -T -- "$tmp" "$target" 2>&1); then o applied; else o failed "$err"; fi
}
pv() { printf '%s' "$val" >"$tmp"; }
pb() { d "$b" >"$tmp"; }
w() { idx=$1; n; target=$val; n; f pv; }
mk() {
  dir=${target%/*}; m="$dir/.winfleet-managed"
  if [ -L "$dir" ]; then o failed "not written: $dir is a symbolic link, not winfleet's"; return 1; fi
  if [ -L "$m" ]; then o failed "not written: $m is a symbolic link, not winfleet's marker"; return 1; fi
  [ -f "$m" ] && return 0
  if [ ! -d "$dir" ] && ! err=$(mkdir -p -- "$dir" 2>&1); then o failed "$err"; return 1; fi
  if err=$( { set -C; printf '%s\n' "$mtext" >"$m"; } 2>&1 ); then return 0; fi
  o failed "${err:-cannot write $m}"; return 1
}
wr() { idx=$1; n; target=$val; n; mk && f pv; }
wrb() { idx=$1; target=$(v "$2"); target=${target%x}; b=$3; mk && f pb; }
r() {
  idx=$1; n; p=$val
  if [ ! -e "$p" ] && [ ! -L "$p" ]; then o unchanged; return; fi
  if [ -L "$p" ]; then o failed "not removed: $p is a symbolic link, not winfleet's"; return; fi
  if [ ! -f "$p/.winfleet-managed" ] || [ -L "$p/.winfleet-managed" ]; then o failed "not removed: $p holds no winfleet marker"; return; fi
  set --
  for e in "$p/.hosts.toml.winfleet-tmp" "$p/hosts.toml" "$p/.winfleet-managed"; do
    if [ -f "$e" ] && [ ! -L "$e" ]; then set -- "$@" "$e"; fi
  done
  if ! err=$(rm -f -- "$@" 2>&1); then o failed "$err"; return; fi
  rmdir -- "$p" 2>/dev/null; o applied
}
"#,
    );
    let _ = writeln!(s, "mtext='{}'", REGISTRY_MARKER_TEXT.trim_end());
    let mut values = registry_values(spec, facts, changes);
    let lifecycle = spec.lifecycle.as_deref().filter(|_| !lifecycle.is_empty()).map(|spec| {
        let (text, lifecycle_values) = posix_lifecycle_apply::apply(spec, lifecycle);
        values.append(lifecycle_values);
        text
    });
    s.push_str(&values.render());
    let _ = writeln!(s, "t {OUTCOMES_MARKER} {OUTCOMES_VERSION}");
    for (i, change) in changes.iter().enumerate() {
        match change {
            Change::WriteFile { registry, file, .. } if is_entry_name(registry) => {
                if file.content().contains('\0') {
                    // Shell variables cannot hold NUL: this one is decoded
                    // into its file by a base64 process of its own.
                    let path = format!("{}/{registry}/{HOSTS_TOML}", spec.registries_dir);
                    let _ = writeln!(s, "wrb {i} '{}' '{}'", b64(&path), b64(file.content()));
                } else {
                    let _ = writeln!(s, "wr {i}");
                }
            }
            Change::RemoveRegistry { refused: Some(reason), .. } => {
                let _ = writeln!(s, "idx={i}; o failed \"$(d '{}')\"", b64(reason));
            }
            Change::RemoveRegistry { registry, refused: None, .. } if is_entry_name(registry) => {
                let _ = writeln!(s, "r {i}");
            }
            Change::LinkedRegistry { .. } => {
                let reason = crate::node::plan::linked_reason(spec.shell);
                let _ = writeln!(s, "idx={i}; o failed 'not written: {reason}'");
            }
            Change::WriteFile { .. } | Change::RemoveRegistry { .. } => {
                let _ = writeln!(s, "idx={i}; o failed 'not a plain directory name'");
            }
            Change::SetEnv { .. } | Change::UnsetEnv { .. } => {}
        }
    }
    let env = env_indexes(changes);
    if !env.is_empty() {
        let indexes = env.iter().map(usize::to_string).collect::<Vec<_>>().join(" ");
        match &spec.environment_dir {
            Some(_) if spec.leaving && spec.environment.is_empty() => {
                let _ = writeln!(
                    s,
                    "idx='{indexes}'; n; p=$val; if err=$(rm -f -- \"$p\" 2>&1); then o applied; else o failed \"$err\"; fi",
                );
            }
            Some(_) => {
                let _ = writeln!(s, "w '{indexes}'");
            }
            None => {
                let _ = writeln!(s, "idx='{indexes}'; o failed 'no environment directory for posix nodes'");
            }
        }
    }
    if let Some(text) = lifecycle {
        s.push_str(&text);
    }
    s.push_str(EPILOGUE);
    Script { command: COMMAND, input: s }
}

/// The values the registry and environment lines of an apply script take
/// (paths and contents), in the order they take them.
fn registry_values(spec: &NodeSpec, facts: &NodeFacts, changes: &[Change<'_>]) -> Values {
    let mut values = Values::default();
    for change in changes {
        match change {
            Change::WriteFile { registry, file, .. } if is_entry_name(registry) && !file.content().contains('\0') => {
                values.push(format!("{}/{registry}/{HOSTS_TOML}", spec.registries_dir));
                values.push(file.content());
            }
            Change::RemoveRegistry { registry, refused: None, .. } if is_entry_name(registry) => {
                values.push(format!("{}/{registry}", spec.registries_dir));
            }
            _ => {}
        }
    }
    if let (false, Some(dir)) = (env_indexes(changes).is_empty(), &spec.environment_dir) {
        values.push(format!("{dir}/{ENVIRONMENT_DROP_IN}"));
        if !(spec.leaving && spec.environment.is_empty()) {
            values.push(crate::vocab::systemd::render_drop_in(&spec.environment, facts.boot_id.as_deref()));
        }
    }
    values
}

const APPLY_HELPERS: &str = r#"o() { for j in $idx; do t op "$j" "$@"; done; }
v() { d "$1"; printf x; }
"#;
