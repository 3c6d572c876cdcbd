//! The systemctl shim of the test nodes (see [`systemctl_script`]).

use std::fs;
use std::path::Path;

use super::TestNode;

/// The service manager side of a test node: the shim, simulated reboots,
/// and the Containers feature's stand-in those reboots load.
impl TestNode {
    /// Installs the systemctl shim for units in `units` (relative to home).
    pub fn install_systemctl(&self, units: &str) {
        let units = if units.starts_with('/') { units.into() } else { self.path(units) };
        self.shim("systemctl", &systemctl_script(&units, &self.dir.join("services"), &self.dir.join("boot_id")));
    }

    /// Takes the Containers feature away (its posix stand-in's kernel
    /// modules unloaded), as on a Windows host that never had it. Seen over
    /// SSH only as root, where each node has its own `/sys/module`.
    pub fn without_containers_feature(&self) {
        for module in winfleet::lifecycle::containers::POSIX_MODULES {
            fs::remove_dir(self.dir.join("sysmodule").join(module)).expect("unloading a module");
        }
    }

    /// Makes `systemctl reboot` simulate a reboot (services restarted, a
    /// new boot id) instead of only recording it. The new boot id is seen
    /// over SSH only as root, where each node has its own mount namespace.
    pub fn simulate_reboots(&self) {
        self.simulate_reboots_taking(1);
    }

    /// The same with reboots that take `seconds` (a slow Windows reboot:
    /// the new boot id comes that long after the command returns).
    pub fn simulate_reboots_taking(&self, seconds: u32) {
        let state = self.dir.join("services");
        fs::create_dir_all(&state).expect("services");
        fs::write(state.join("simulate-reboots"), seconds.to_string()).expect("simulate-reboots");
        let meta = fs::metadata(&self.dir).expect("node dir");
        super::chown_tree(
            &state,
            Some((std::os::unix::fs::MetadataExt::uid(&meta), std::os::unix::fs::MetadataExt::gid(&meta))),
        );
    }
}

/// A `systemctl` for nodes without systemd: the verbs winfleet uses on the
/// units in `units`, services run as detached processes whose pids, logs
/// and enablement live in `state`; every call is logged to
/// `state/systemctl.log`. `start` starts `Requires=` units first and runs
/// `ExecStart=` (split by the shell, which reads simple quoting as systemd
/// does) in `WorkingDirectory=`; `stop` stops the units that require this
/// one first, then the service's process group. `Restart=` is not emulated:
/// a killed service stays down (tests use that). `reboot` is recorded in
/// `state/reboots`; a test node cannot reboot, so that is all, unless
/// [`simulate_reboots`](super::TestNode::simulate_reboots) asked for more:
/// then, a second (or the seconds the `simulate-reboots` file says) after
/// the command returns (a real reboot drops the
/// connection), every running service is stopped, `boot` gets a new boot
/// id (the node's `/proc/sys/kernel/random/boot_id`, bind-mounted as root),
/// the kernel modules its modules-load.d files name are loaded (made
/// present in its `/sys/module`, bind-mounted as root, like the boot id)
/// and the enabled services start again. A reboot under way has its
/// process group in `state/reboot.pgid` (a VM deleted mid-reboot must not
/// come back: [`TestNode::stop`](super::TestNode::stop) ends it). It
/// reads units and pid files with the shell's builtins: a call costs about
/// what one `systemctl` costs, not a handful of programs (the Machine
/// bench's CPU is shared by 20 VMs).
pub fn systemctl_script(units: &Path, state: &Path, boot: &Path) -> String {
    format!(
        r#"#!/bin/sh
units='{units}'; state='{state}'; boot='{boot}'; node=${{boot%/*}}
[ -d "$state" ] || mkdir -p "$state"
echo "$*" >> "$state/systemctl.log"
verb=$1; shift
[ "$1" = "--" ] && shift
key() {{
  kv=; [ -f "$units/$1" ] || return 0
  while IFS= read -r kl || [ -n "$kl" ]; do case $kl in "$2="*) kv=${{kl#"$2="}}; return 0 ;; esac; done <"$units/$1"
}}
running() {{ [ -f "$state/$1.pid" ] && read -r rp <"$state/$1.pid" && kill -0 "$rp" 2>/dev/null; }}
start() {{
  local n wd exe dep deps
  n=${{1%.service}}
  running "$n" && return 0
  [ -f "$units/$n.service" ] || {{ echo "Unit $n.service not found." >&2; return 5; }}
  key "$n.service" Requires; deps=$kv
  for dep in $deps; do start "$dep" || return 1; done
  key "$n.service" WorkingDirectory; wd=$kv; key "$n.service" ExecStart; exe=$kv
  ( cd "${{wd:-/}}" && {{ setsid /bin/sh -c "exec $exe" >>"$state/$n.log" 2>&1 </dev/null & echo $! > "$state/$n.pid"; }} )
}}
stop() {{
  local n u m pid i
  n=${{1%.service}}
  for u in "$units"/*.service; do
    [ -f "$u" ] || continue
    m=${{u##*/}}; m=${{m%.service}}
    key "$m.service" Requires
    case " $kv " in *" $n.service "*) stop "$m" ;; esac
  done
  running "$n" || {{ [ ! -e "$state/$n.pid" ] || rm -f "$state/$n.pid"; return 0; }}
  read -r pid <"$state/$n.pid"
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
  i=0
  while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
  kill -KILL -- "-$pid" 2>/dev/null
  rm -f "$state/$n.pid"
}}
rc=0
case $verb in
daemon-reload) ;;
enable) for u in "$@"; do : >>"$state/${{u%.service}}.enabled"; done ;;
disable) for u in "$@"; do rm -f "$state/${{u%.service}}.enabled"; done ;;
start) for u in "$@"; do start "$u" || rc=1; done ;;
stop) for u in "$@"; do stop "$u"; done ;;
restart) for u in "$@"; do stop "$u"; start "$u" || rc=1; done ;;
reboot)
  echo reboot >> "$state/reboots"
  if [ -f "$state/simulate-reboots" ]; then
    setsid "$0" simulated-reboot </dev/null >/dev/null 2>&1 &
    echo $! > "$state/reboot.pgid"
  fi
  ;;
simulated-reboot)
  d=$(cat "$state/simulate-reboots" 2>/dev/null); sleep "${{d:-1}}"
  for p in "$state"/*.pid; do [ -f "$p" ] && n=${{p##*/}} && stop "${{n%.pid}}"; done
  cat /proc/sys/kernel/random/uuid > "$boot"
  for f in "$node"/modules-load.d/*.conf; do
    [ -f "$f" ] || continue
    while read -r m; do case $m in ''|'#'*) ;; *) mkdir -p "$node/sysmodule/$m" ;; esac; done < "$f"
  done
  for e in "$state"/*.enabled; do [ -f "$e" ] && n=${{e##*/}} && start "${{n%.enabled}}"; done
  rm -f "$state/reboot.pgid"
  ;;
is-active) for u in "$@"; do if running "${{u%.service}}"; then echo active; else echo inactive; rc=3; fi; done ;;
is-enabled) for u in "$@"; do if [ -f "$state/${{u%.service}}.enabled" ]; then echo enabled; else echo disabled; rc=1; fi; done ;;
*) echo "systemctl shim: unsupported verb $verb" >&2; rc=1 ;;
esac
exit $rc
"#,
        units = units.display(),
        state = state.display(),
        boot = boot.display()
    )
}
