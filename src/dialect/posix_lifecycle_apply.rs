//! The lifecycle's changes in the posix dialect: the preparation script
//! (directories, recorded in the install record before they are created,
//! and the uploads' staging directories) and the apply part (stops,
//! leftovers removed, uploads finished, generated files, systemd units,
//! starts, removals).
//!
//! Cost matters here: a payload has hundreds of files, so the scripts work
//! on whole lists with one process each (one `sha256sum` and one `mv -t`
//! per directory, one `systemctl` per verb) and loop over lines with shell
//! builtins. Every repository and cluster value arrives base64-encoded,
//! with all the script's others ([`Values`]: one `base64 -d` a script),
//! taken by `n` in the order the lines were written; lists are
//! tab-separated lines. Directories are made by one `mkdir` (one per
//! directory only when that fails, to say which).
//!
//! Uploads land in `<dir>/.winfleet-staging/<name>` ([`staged`]), or
//! gzip-encoded as `<name>.winfleet-gz` (`ssh::sftp::wire`): the apply
//! part decodes those with one `gzip -d` per directory (a file that fails
//! to decode is removed, the others decoded one by one), then checks each
//! staged file's SHA-256, records it, and moves the good ones into place
//! together.
//!
//! [`staged`]: super::posix_lifecycle::staged

use std::collections::BTreeMap;
use std::fmt::Write;

use super::posix_lifecycle::{STAGING, split};
use super::posix_values::{Part, Values};
use crate::lifecycle::LifecycleSpec;
use crate::lifecycle::change::LifecycleChange;
use crate::lifecycle::facts::Leftover;
use crate::lifecycle::record::{HEADER, record_path};
use crate::vocab::Shell;

const RECORD: &str = r#"nl='
'
rec() { [ -d "$recd" ] || mkdir -p -- "$recd" || return 1
  [ -f "$recf" ] || printf '%s\n' "$rech" >"$recf" || return 1
  printf '%s\n' "$1" >>"$recf"; }
"#;

/// The install record's path, directory and header, taken first.
fn record_setup(values: &mut Values) -> String {
    let path = record_path(Shell::Posix);
    let (dir, _) = split(path, Shell::Posix);
    values.push(path);
    values.push(dir);
    values.push(HEADER);
    format!("n; recf=$val; n; recd=$val; n; rech=$val\n{RECORD}")
}

/// The preparation script's body and its values: directories (recorded
/// before they are created) and the staging directories of the uploads.
/// `None` when there is nothing to prepare.
pub fn prepare(spec: &LifecycleSpec, changes: &[(usize, &LifecycleChange<'_>)]) -> Option<(String, Values)> {
    let mut dirs = String::new();
    let mut staging: Vec<String> = Vec::new();
    for (i, change) in changes {
        match change {
            LifecycleChange::CreateDir { path } => {
                let _ = writeln!(dirs, "{i}\t{path}");
            }
            LifecycleChange::Upload { file, .. } => {
                let stage = format!("{}/{STAGING}", split(&file.path, spec.shell).0);
                if !staging.contains(&stage) {
                    staging.push(stage);
                }
            }
            _ => {}
        }
    }
    for stage in &staging {
        let _ = writeln!(dirs, "-\t{stage}");
    }
    if dirs.is_empty() {
        return None;
    }
    let mut values = Values::default();
    let mut s = record_setup(&mut values);
    values.push(dirs);
    s.push_str(MKDIRS);
    Some((s, values))
}

/// The directories of `$lst` (index, path; parents first) that are missing,
/// recorded, then made by one `mkdir`; when it fails, each that is still
/// missing is made alone, to say which failed and why.
const MKDIRS: &str = r#"n; lst=$val; set --; pend=
while IFS='	' read -r i p; do
  [ -n "$i" ] || continue
  idx=$i; [ "$i" = - ] && idx=
  if [ -d "$p" ]; then o unchanged; continue; fi
  if ! rec "dir $p"; then o failed "cannot write the install record $recf"; continue; fi
  set -- "$@" "$p"; pend="$pend$i	$p$nl"
done <<WINFLEET_MD
$lst
WINFLEET_MD
if [ "$#" -gt 0 ]; then
  mkdir -- "$@" 2>/dev/null; all=$?
  while IFS='	' read -r i p; do
    [ -n "$i" ] || continue
    idx=$i; [ "$i" = - ] && idx=
    if [ "$all" -eq 0 ] || [ -d "$p" ]; then o applied; elif err=$(mkdir -- "$p" 2>&1); then o applied; else o failed "$err"; fi
  done <<WINFLEET_MP
$pend
WINFLEET_MP
fi
"#;

/// The apply part of the lifecycle changes (inside `main`), in the
/// plan's order by kind: stops, uploads finished, generated files, units
/// (then one daemon-reload and enable), starts; and the values its lines
/// take.
pub fn apply(spec: &LifecycleSpec, changes: &[(usize, &LifecycleChange<'_>)]) -> (String, Values) {
    let (mut stops, mut files, mut units, mut starts) =
        (Part::default(), Part::default(), Part::default(), Part::default());
    let mut leftovers = Part::default();
    let mut uploads: BTreeMap<&str, String> = BTreeMap::new();
    for (i, change) in changes {
        if super::trust::posix_line(*i, change, &mut files) || super::containers::posix_line(*i, change, &mut files) {
            continue;
        }
        match change {
            LifecycleChange::Stop { service } => {
                stops.values.push(service.name.as_str());
                let _ = writeln!(stops.text, "sv {i} stop");
            }
            LifecycleChange::Upload { file, .. } => {
                let (dir, name) = split(&file.path, Shell::Posix);
                let _ = writeln!(uploads.entry(dir).or_default(), "{i}\t{name}\t{}", file.sha256);
            }
            LifecycleChange::WriteGenerated { file, .. } => {
                files.values.push(file.path.as_str());
                let content = files.values.content(file.file.content());
                let _ = writeln!(files.text, "wr {i} {} '{content}'", file.file.sha256());
            }
            LifecycleChange::Define { service, unit: Some(unit), .. } => {
                let path = format!("{}/{}.service", spec.units_dir.as_deref().unwrap_or("."), service.name);
                let sha = crate::vocab::file::sha256_hex(unit.as_bytes());
                let (state, certs) = service.state();
                let lines: Vec<String> = state
                    .iter()
                    .map(|p| format!("state {p}"))
                    .chain(certs.iter().map(|d| format!("certs {d}")))
                    .collect();
                units.values.push(path);
                let content = units.values.content(unit);
                units.values.push(service.name.as_str());
                units.values.push(lines.join("\n"));
                let _ = writeln!(units.text, "un {i} {sha} '{content}'");
            }
            LifecycleChange::Define { .. } => {
                let _ = writeln!(units.text, "idx={i}; o failed 'a posix node needs a unit file'");
            }
            LifecycleChange::Start { service, pre_scripts, .. } => {
                for script in pre_scripts {
                    let content = starts.values.content(script);
                    let _ = writeln!(starts.text, "pre '{content}'");
                }
                starts.values.push(service.name.as_str());
                let _ = writeln!(starts.text, "sv {i} start");
            }
            LifecycleChange::RemoveService { name } => {
                stops.values.push(*name);
                let _ = writeln!(stops.text, "rmsvc {i}");
            }
            LifecycleChange::RemoveFile { path } => {
                files.values.push(*path);
                let _ = writeln!(files.text, "rmf {i}");
            }
            LifecycleChange::RemoveCerts { dir } => {
                files.values.push(*dir);
                let _ = writeln!(files.text, "rmcerts {i}");
            }
            LifecycleChange::RemoveDir { path } => {
                files.values.push(*path);
                let _ = writeln!(files.text, "rmd {i}");
            }
            LifecycleChange::RemoveLeftover { path, kind } => {
                let kind = match kind {
                    Leftover::Staging => "staging",
                    Leftover::Temporary => "temp",
                };
                leftovers.values.push(*path);
                let _ = writeln!(leftovers.text, "rmleft {i} {kind}");
            }
            LifecycleChange::ForgetRecord => {
                let _ = writeln!(files.text, "forget {i}");
            }
            LifecycleChange::CreateDir { .. } | LifecycleChange::EnableContainers => {}
        }
    }
    let mut all = Part::default();
    all.text = record_setup(&mut all.values);
    all.values.push(spec.units_dir.as_deref().unwrap_or("."));
    all.text.push_str("n; unitsdir=$val\n");
    all.text.push_str(HELPERS);
    all.text.push_str(super::trust::helpers(changes, super::trust::POSIX_HELPERS));
    all.text.push_str(super::containers::helpers(changes, super::containers::POSIX_HELPERS));
    all.append(stops);
    all.append(leftovers);
    for (dir, list) in uploads {
        all.values.push(dir);
        all.values.push(list);
        all.text.push_str("fin\n");
    }
    all.append(files);
    if !units.text.is_empty() {
        all.text.push_str("unok=; unn=\n");
        all.append(units);
        all.text.push_str("reload\n");
    }
    all.append(starts);
    (all.text, all.values)
}

const HELPERS: &str = r#"o() { [ "$1" = failed ] && anyfail=1; for j in $idx; do t op "$j" "$@"; done; }
rmsvc() {
  idx=$1; n; sn=$val
  systemctl stop -- "$sn.service" >/dev/null 2>&1; systemctl disable -- "$sn.service" >/dev/null 2>&1
  if err=$(rm -f -- "$unitsdir/$sn.service" 2>&1); then systemctl daemon-reload >/dev/null 2>&1; o applied; else o failed "$err"; fi
}
rmf() {
  idx=$1; n; p=$val
  if [ ! -e "$p" ] || [ -L "$p" ]; then o unchanged; elif err=$(rm -f -- "$p" 2>&1); then o applied; else o failed "$err"; fi
}
rmcerts() {
  idx=$1; n; p=$val; set --
  for f in "$p"/kubelet-*.pem; do [ -e "$f" ] || [ -L "$f" ] && set -- "$@" "$f"; done
  if [ "$#" -eq 0 ]; then o unchanged; elif err=$(rm -f -- "$@" 2>&1); then o applied; else o failed "$err"; fi
}
rmd() {
  idx=$1; n; p=$val
  if [ ! -d "$p" ] || [ -L "$p" ]; then o unchanged; elif [ -n "$(ls -A -- "$p" 2>/dev/null)" ]; then o unchanged
  elif err=$(rmdir -- "$p" 2>&1); then o applied; else o failed "$err"; fi
}
rmleft() {
  idx=$1; n; p=$val
  if [ -L "$p" ]; then o failed "not removed: $p is a symbolic link, not winfleet's"; return; fi
  if [ "$2" = temp ]; then
    if [ ! -f "$p" ]; then o unchanged; elif err=$(rm -f -- "$p" 2>&1); then o applied; else o failed "$err"; fi
    return
  fi
  if [ ! -d "$p" ]; then o unchanged; return; fi
  set --
  for f in "$p"/* "$p"/.[!.]* "$p"/..?*; do if [ -f "$f" ] || [ -L "$f" ]; then set -- "$@" "$f"; fi; done
  if [ "$#" -gt 0 ] && ! err=$(rm -f -- "$@" 2>&1); then o failed "$err"; return; fi
  if err=$(rmdir -- "$p" 2>&1); then o applied; else o failed "$err"; fi
}
forget() {
  idx=$1
  if [ -n "$anyfail" ]; then o failed "kept the install record: a removal above failed; the next round tries again"; return; fi
  if err=$(rm -f -- "$recf" 2>&1); then rmdir -- "$recd" 2>/dev/null; o applied; else o failed "$err"; fi
}
take() { n; target=$val; cb=$1; cv=; [ -n "$cb" ] || { n; cv=$val; }; }
put() {
  dir=${target%/*}; [ "$dir" = "$target" ] && dir=.; tmp="$dir/.${target##*/}.winfleet-tmp"
  if [ -L "$tmp" ]; then err="not written: $tmp is a symbolic link, not winfleet's"; return 1; fi
  rec "file $1 $target" || { err="cannot write the install record $recf"; return 1; }
  if [ -f "$tmp" ]; then err=$(rm -f -- "$tmp" 2>&1) || return 1; fi
  set -C
  if [ -n "$cb" ]; then d "$cb" >"$tmp"; else printf '%s' "$cv" >"$tmp"; fi 2>/dev/null; rc=$?
  set +C
  if [ "$rc" -ne 0 ]; then err=$( { : >>"$tmp"; } 2>&1 ); err=${err:-cannot write $tmp}; return 1; fi
  err=$(mv -f -T -- "$tmp" "$target" 2>&1)
}
wr() { idx=$1; take "$3"; if put "$2"; then o applied; else o failed "$err"; fi; }
un() {
  idx=$1; take "$3"; n; sn=$val; n; st=$val
  if ! rec "service $sn${st:+$nl$st}"; then o failed "cannot write the install record $recf"; return; fi
  if put "$2"; then unok="$unok $1"; unn="$unn $sn.service"; else o failed "$err"; fi
}
reload() {
  idx=$unok; [ -n "$idx" ] || return
  if ! err=$(systemctl daemon-reload 2>&1); then o failed "systemctl daemon-reload: $err"; return; fi
  if err=$(systemctl enable -- $unn 2>&1); then o applied; else o failed "systemctl enable: $err"; fi
}
pre() {
  if [ -n "$1" ]; then err=$( { d "$1" | /bin/sh; } 2>&1 ); else n; err=$( { printf '%s' "$val" | /bin/sh; } 2>&1 ); fi ||
    prefail="a pre-script failed: $err"
}
sv() {
  idx=$1; n; sn=$val
  if [ "$2" = start ] && [ -n "$prefail" ]; then o failed "$prefail"; prefail=; return; fi
  if err=$(systemctl "$2" -- "$sn.service" 2>&1); then o applied; else o failed "systemctl $2 $sn: $err"; fi
}
fin() {
  n; dir=$val; n; lst=$val; stg="$dir/.winfleet-staging"
  set --
  for f in "$stg"/*.winfleet-gz; do [ -f "$f" ] && set -- "$@" "$f"; done
  if [ "$#" -gt 0 ]; then
    gzip -d -f -q -S .winfleet-gz -- "$@" >/dev/null 2>&1 ||
      for f; do [ -f "$f" ] && { gzip -d -f -q -S .winfleet-gz -- "$f" >/dev/null 2>&1 || rm -f -- "${f%.winfleet-gz}"; }; done
    rm -f -- "$@"
  fi
  set --
  while IFS='	' read -r i n s; do [ -n "$i" ] && set -- "$@" "$n"; done <<WINFLEET_FL
$lst
WINFLEET_FL
  sums=$nl$(cd -- "$stg" 2>/dev/null && sha256sum -- "$@" 2>/dev/null)$nl; good=
  while IFS='	' read -r i n s; do
    [ -n "$i" ] || continue; idx=$i
    case $sums in
    *"  $n$nl"*) x=${sums%%"  $n$nl"*}; x=${x##*"$nl"} ;;
    *) x= ;;
    esac
    if [ "$x" != "$s" ]; then
      rm -f -- "$stg/$n"; o failed "the upload arrived with SHA-256 ${x:-none}, expected $s"
    elif ! rec "file $s $dir/$n"; then o failed "cannot write the install record $recf"
    else good="$good$i	$n$nl"; fi
  done <<WINFLEET_FL
$lst
WINFLEET_FL
  set --; idx=
  while IFS='	' read -r i n; do [ -n "$i" ] && { set -- "$@" "$stg/$n"; idx="$idx $i"; }; done <<WINFLEET_FG
$good
WINFLEET_FG
  if [ "$#" -gt 0 ]; then
    if err=$(mv -f -t "$dir" -- "$@" 2>&1); then o applied; else o failed "$err"; return; fi
    set --
    while IFS='	' read -r i n; do [ -n "$i" ] && set -- "$@" "$dir/$n"; done <<WINFLEET_FG
$good
WINFLEET_FG
    ks=$(stat -c '%s:%.9Y:%.9Z:%i' -- "$@" 2>/dev/null)$nl
    for p in "$@"; do k=${ks%%"$nl"*}; ks=${ks#*"$nl"}; [ -n "$k" ] && t lkey "$p" "$k"; done
  fi
  rmdir -- "$stg" 2>/dev/null
}
"#;
