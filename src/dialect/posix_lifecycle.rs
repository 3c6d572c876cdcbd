//! The lifecycle in the posix dialect, its observation part: directories,
//! payload files (a stat key first, a SHA-256 only when the key changed),
//! services and their units, the pre-scripts' variables and the install
//! record; and where an upload is staged on a node (both dialects). The
//! preparation and apply parts are [`super::posix_lifecycle_apply`]'s.
//!
//! Cost matters here: a payload has hundreds of files, so the script works
//! on whole lists with one process each (one `stat`, one `sha256sum`, one
//! `systemctl`) and loops over lines with shell builtins. Every repository
//! value arrives in one base64 list; lists are tab-separated lines (node
//! paths cannot hold a tab or a newline: validation and the payload reader
//! refuse control characters).
//!
//! Uploads land in `<dir>/.winfleet-staging/<name>` (same directory, so the
//! final `mv` is a rename). The observation also looks for what a crash
//! left of winfleet's own next to the files winfleet writes (the spec's,
//! then the install record's): a staging directory, a
//! `.<name>.winfleet-tmp` temporary file ([`crate::lifecycle::leftover`]).

use std::fmt::Write;

use super::b64;
use super::posix_values::Values;
use crate::lifecycle::LifecycleSpec;
use crate::lifecycle::record::record_path;
use crate::vocab::Shell;

/// The staging directory of uploads into `dir`.
pub use crate::lifecycle::leftover::STAGING;

/// `(directory, file name)` of a node path.
pub fn split(path: &str, shell: Shell) -> (&str, &str) {
    let sep = match shell {
        Shell::Posix => '/',
        Shell::Powershell => '\\',
    };
    match path.rfind(sep) {
        Some(i) => (&path[..i], &path[i + 1..]),
        None => (".", path),
    }
}

/// The staged path of an upload to `path`.
pub fn staged(path: &str, shell: Shell) -> String {
    let (dir, name) = split(path, shell);
    match shell {
        Shell::Posix => format!("{dir}/{STAGING}/{name}"),
        Shell::Powershell => format!("{dir}\\{STAGING}\\{name}"),
    }
}

/// What the observation needs besides the spec.
#[derive(Clone, Debug, Default)]
pub struct ObserveList {
    /// Node path → the stat key winfleet knows a hash for ("" = none).
    pub files: Vec<(String, String)>,
    /// (service, variable, script) of the pre-scripts that give a variable.
    pub variables: Vec<(String, String, String)>,
    /// Read winfleet's install record too.
    pub record: bool,
    /// Ask about the Containers feature (a host being configured).
    pub containers: bool,
}

/// The observation part (inside `main`, after the common facts).
/// Its values go into `values`, after the common part's.
pub fn observe(spec: &LifecycleSpec, list: &ObserveList, values: &mut Values) -> String {
    let mut lines = String::new();
    for dir in &spec.directories {
        let _ = writeln!(lines, "D\t{dir}");
    }
    for (path, key) in &list.files {
        let _ = writeln!(lines, "F\t{path}\t{key}");
    }
    for service in &spec.services {
        let _ = writeln!(lines, "S\t{}", service.name);
    }
    for (service, variable, script) in &list.variables {
        let _ = writeln!(lines, "P\t{service}\t{variable}\t{}", b64(script));
    }
    values.push(lines);
    values.push(spec.units_dir.as_deref().unwrap_or("."));
    let mut s = "n; lc=$val; n; units=$val\n".to_owned();
    s.push_str(OBSERVE);
    if list.containers {
        s.push_str(&super::containers::posix_observe());
    }
    if list.record {
        values.push(record_path(Shell::Posix));
        let _ = writeln!(s, "n; recf=$val\n{RECORD_OBSERVE}");
    }
    s
}

/// The install record, and the leftovers next to what it names (a
/// recorded staging directory counts as its parent's).
const RECORD_OBSERVE: &str = r#"if [ -f "$recf" ]; then
  t lrecord "$(cat -- "$recf")"
  while IFS= read -r l; do
    case $l in
    "dir "*) p=${l#dir }; case $p in */.winfleet-staging) p=${p%/*} ;; esac; lod "$p" ;;
    "file "*) l=${l#file }; lof "${l#* }" ;;
    esac
  done <"$recf"
fi"#;

/// `lod DIR`: DIR's staging directory, once per directory; `lof PATH`: the
/// staging directory and temporary file of a file winfleet writes. A
/// symbolic link is never winfleet's.
const OBSERVE: &str = r#"tab='	'
t home "$HOME"
lseen=
lod() {
  case $nl$lseen in *"$nl$1$nl"*) return ;; esac
  lseen="$lseen$1$nl"
  if [ -d "$1/.winfleet-staging" ] && [ ! -L "$1/.winfleet-staging" ]; then t lleft "$1/.winfleet-staging" staging; fi
}
lof() {
  lp=${1%/*}; [ "$lp" = "$1" ] && lp=.
  lod "$lp"; lp="$lp/.${1##*/}.winfleet-tmp"
  if [ -f "$lp" ] && [ ! -L "$lp" ]; then t lleft "$lp" temp; fi
}
set --; fk=; svcs=
while IFS="$tab" read -r k a b c; do
  case $k in
  D) if [ -d "$a" ]; then t ldir "$a" present; else t ldir "$a" absent; fi ;;
  F) lof "$a"; if [ -f "$a" ]; then set -- "$@" "$a"; fk="$fk$b$nl"; else t lfile "$a" absent; fi ;;
  S) lof "$units/$a.service"; svcs="$svcs$a$nl" ;;
  P) if out=$(d "$c" | /bin/sh 2>/dev/null); then t lvar "$a" "$b" ok "$out"
     else e=$(d "$c" | /bin/sh 2>&1 >/dev/null); t lvar "$a" "$b" err "${e:-the script failed}"; fi ;;
  esac
done <<WINFLEET_LC
$lc
WINFLEET_LC
if [ "$#" -gt 0 ]; then
  ks=$(stat -c '%s:%.9Y:%.9Z:%i' -- "$@" 2>/dev/null)$nl; h=
  for p in "$@"; do
    cur=${ks%%"$nl"*}; ks=${ks#*"$nl"}; k=${fk%%"$nl"*}; fk=${fk#*"$nl"}
    if [ -n "$cur" ] && [ "$cur" = "$k" ]; then t lfile "$p" same "$cur"; else t lfile "$p" key "$cur"; h="$h$p$nl"; fi
  done
  set --
  while IFS= read -r p; do [ -n "$p" ] && set -- "$@" "$p"; done <<WINFLEET_LH
$h
WINFLEET_LH
  if [ "$#" -gt 0 ]; then t lsums; sha256sum -z -- "$@" 2>/dev/null; t end-lsums; fi
fi
if [ -n "$svcs" ]; then
  set --
  while IFS= read -r n; do [ -n "$n" ] && set -- "$@" "$n.service"; done <<WINFLEET_LS
$svcs
WINFLEET_LS
  st=$(systemctl is-active -- "$@" 2>/dev/null)$nl; u=
  for n in "$@"; do
    s=${st%%"$nl"*}; st=${st#*"$nl"}
    t lsvcstate "${n%.service}" "${s:-unknown}"
    [ -f "$units/$n" ] && u="$u$units/$n$nl"
  done
  set --
  while IFS= read -r p; do [ -n "$p" ] && set -- "$@" "$p"; done <<WINFLEET_LU
$u
WINFLEET_LU
  if [ "$#" -gt 0 ]; then t lusums; sha256sum -z -- "$@" 2>/dev/null; t end-lusums; fi
fi
"#;
