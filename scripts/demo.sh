#!/usr/bin/env bash
# The winfleet demo: validate and render the bundled examples-repo, then
# plan a pull request against it, as CI would on a real config repository.
# Then the daemon on a local demo fleet: real sshd nodes, a bare Git remote,
# a merged change announced by webhook, the files on a node, and the status
# commits; as root, against a cluster as well: a real control plane
# (kube-apiserver, kube-controller-manager, etcd, built with Go) where Go is
# installed, else a simulated one, with the tests' Machine API, so that the
# repository's MachineSets become Ready nodes. It ends all Ready: the
# script's exit code is `winfleet status`'s (0). Works on a fresh machine with the Rust
# toolchain; installs what it needs (git, a C toolchain, perl and make for OpenSSL,
# OpenSSH server) when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

cat <<'NEEDS'
This demo needs:
  - the Rust toolchain (cargo) on PATH;
  - git, a C toolchain, pkg-config, perl, make and the OpenSSH server and
    client; missing ones are installed with apt-get, which needs root;
  - as root, the demo fleet creates an unprivileged login user,
    winfleet-node (shell /bin/sh), and an alias of it, Administrator (the
    user winfleet logs in to Machines as), and runs its sshd nodes as root,
    each with its own host name and boot id (unshare); the daemon then also
    works against a cluster: joins, Node metadata, safe reboots, and
    MachineSets, whose Machines the tests' Machine API
    (tests/support/machine_provider.rs) creates and boots as sshd "VMs"
    that winfleet configures into Nodes. The cluster is REAL where the test
    control plane is already built (etcd, kube-apiserver and
    kube-controller-manager v1.37.2 from the Kubernetes Go modules,
    tests/controlplane: the test suite builds it) or with
    WINFLEET_DEMO_REAL=1 and Go 1.26 (its first build takes 10 to 15
    minutes on 2 cores; later ones seconds); otherwise, or with
    WINFLEET_DEMO_SIMULATED=1, it is SIMULATED (winfleet's in-memory test
    API server). Either way each node's kubelet is the tests' fake kubelet.
    The demo says which it uses. As anyone else the nodes run as you, log
    in as you, the daemon runs SSH-only, and the repository has no
    MachineSets. It removes what it created when it ends (the users too,
    when it created them), and ends all Ready (exit code 0).
NEEDS
echo

command -v cargo >/dev/null 2>&1 || { echo "demo: cargo is not on PATH (install Rust from https://rustup.rs)" >&2; exit 1; }
mapfile -t need < <(scripts/demo-packages.sh)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "demo: missing ${need[*]}; install them (apt-get as root does it here), then run the demo again" >&2
    exit 1
  fi
  # Only what is missing, nothing upgraded (scripts/demo-packages.sh pins
  # OpenSSH's server to the client the host has); apt's and dpkg's output
  # goes to a log, shown only when the install fails.
  log=$(mktemp /tmp/winfleet-demo-apt.XXXXXX)
  echo "== installing ${need[*]} (log: $log)"
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends --no-upgrade "${need[@]}"; } >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    echo "demo: installing ${need[*]} failed (the whole log: $log)" >&2
    exit 1
  fi
  rm -f "$log"
fi

# One build of both programs: the library is compiled once (a second cargo
# call for the example would rebuild it with the dev-dependencies' features).
# The dev profile: nothing in the demo needs an optimised binary, a release
# build of the dependencies takes twice as long, and `cargo test` then
# reuses what this built.
echo "== cargo build --bin winfleet --example demo-fleet (10 to 15 minutes from a fresh clone on 2 cores, seconds once built; the demo then runs about 2 minutes)"
cargo build --bin winfleet --example demo-fleet
# Wherever cargo puts it: CARGO_TARGET_DIR and .cargo/config.toml move target/.
target_dir=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
winfleet=$target_dir/debug/winfleet
demo_fleet=$target_dir/debug/examples/demo-fleet
[ -x "$winfleet" ] && [ -x "$demo_fleet" ] || { echo "demo: cargo built no $winfleet or $demo_fleet" >&2; exit 1; }
work=$(mktemp -d)
# The demo fleet's login users, created as root when missing: removed again
# at the end when the demo created them.
created=()
for user in Administrator winfleet-node; do
  id "$user" >/dev/null 2>&1 || created+=("$user")
done
cleanup() {
  rm -rf "$work"
  [ "$(id -u)" -eq 0 ] || return 0
  for user in ${created[@]+"${created[@]}"}; do
    if id "$user" >/dev/null 2>&1; then
      userdel "$user" 2>/dev/null && echo "demo: removed the user $user it created"
    fi
  done
  return 0
}
trap cleanup EXIT

echo "== winfleet validate --repo examples-repo"
"$winfleet" validate --repo examples-repo

echo
echo "== winfleet render --repo examples-repo --output $work/render"
"$winfleet" render --repo examples-repo --output "$work/render"
( cd "$work/render" && find . -type f ! -name .winfleet-render | sort | head -8 && echo "  …" )
echo "-- 192.0.2.10/registries/mcr.microsoft.com/hosts.toml:"
cat "$work/render/192.0.2.10/registries/mcr.microsoft.com/hosts.toml"

echo
echo "== a pull request: one more instance, a changed mirror, MachineSet scaled"
repo=$work/fleet
cp -r examples-repo "$repo"
git -C "$repo" init -q -b main
git -C "$repo" add -A
git -C "$repo" -c user.name=demo -c user.email=demo@example.com commit -qm "fleet as merged"
git -C "$repo" checkout -q -b add-win03
sed -i 's#mirror.corp.example:5000/oss/kubernetes/pause#mirror2.corp.example:5000/oss/kubernetes/pause#' "$repo/mirrors/pause-idms.yaml"
sed -i 's/^  replicas: 2$/  replicas: 3/' "$repo/machinesets/winworker-vsphere.yaml"
cat >> "$repo/instances/windows-instances.yaml" <<'YAML'
  192.0.2.30: |-
    username=Administrator
YAML
git -C "$repo" -c user.name=demo -c user.email=demo@example.com commit -qam "add 192.0.2.30, move the pause mirror, scale winworker"

echo "== winfleet plan --repo fleet --base main --head add-win03"
set +e
"$winfleet" plan --repo "$repo" --base main --head add-win03
code=$?
set -e
echo "(exit code $code: 0 = no changes, 2 = changes, 1 = error)"

echo
echo "== the daemon on a local demo fleet (real sshd nodes on loopback, a bare Git remote)"
"$demo_fleet" "$winfleet" 3
