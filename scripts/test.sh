#!/usr/bin/env bash
# The README's test command: everything the test suite needs, then the whole
# suite with nothing skipped.
#
#   bash scripts/test.sh [CARGO-TEST-ARGS...]   (e.g. --test lifecycle_join)
#   bash scripts/test.sh --install-only          (step 1 alone: .ci/run, before clippy)
#
# 1. installs the programs the real-peer tests read winfleet's output with
#    (OpenSSH, GnuPG, containerd and a registry, systemd-analyze, promtool,
#    node_exporter, kubectl, Python for the PowerShell stand-in) when missing (apt-get, as
#    root);
# 2. builds the real control plane (etcd, kube-apiserver and
#    kube-controller-manager v1.37.2 from the Kubernetes Go modules in
#    tests/controlplane) and machine-api-operator's controllers
#    (tests/machineapi, its own Go module) beside the Rust test build, with
#    a line per phase and the time it took;
# 3. runs `cargo test --lib --bins --tests -- --include-ignored`: the tests
#    that need those programs are marked #[ignore] with the reason (a plain
#    `cargo test` shows them as ignored, never as passed;
#    scripts/mark-ignored.py marks new ones), and here they run; one whose
#    program is missing fails with the reason, never passes.
#
# Disk: the test build takes about 11 GB of target/ (CARGO_INCREMENTAL=0, set
# here; the dependencies carry no debug info: Cargo.toml). Time: see the README.
set -euo pipefail
cd "$(dirname "$0")/.."

start=$(date +%s)
phase() { echo "== [$(( $(date +%s) - start ))s] $*"; }

export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
free_mb() { df -Pk . | awk 'NR==2 {print int($4 / 1024)}'; }
free_kb=$(df -Pk . | awk 'NR==2 {print $4}')
phase "disk: $((free_kb / 1024)) MB free here"
if [ "${free_kb:-0}" -lt $((14 * 1024 * 1024)) ]; then
  echo "!!!!!!!! only $((free_kb / 1024)) MB free: the test build (11 GB) and the tests' temporary files may not fit !!!!!!!!" >&2
fi

command -v cargo >/dev/null 2>&1 || { echo "test: cargo is not on PATH (install Rust from https://rustup.rs)" >&2; exit 1; }
need_apt=()
command -v cc >/dev/null 2>&1 || need_apt+=(gcc)
command -v git >/dev/null 2>&1 || need_apt+=(git)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
# git2's https and ssh transports (the daemon's fetch and push) link an
# OpenSSL built from source (openssl-src): its Configure is perl with the
# core modules (IPC::Cmd is not in Debian's perl-base), its build make.
perl -MIPC::Cmd -e 1 >/dev/null 2>&1 || need_apt+=(perl)
command -v make >/dev/null 2>&1 || need_apt+=(make)
# The node engine's tests start real OpenSSH servers (tests/support/fleet.rs).
[ -x /usr/sbin/sshd ] || need_apt+=(openssh-server)
[ -x /usr/lib/openssh/sftp-server ] || need_apt+=(openssh-sftp-server)
command -v ssh-keygen >/dev/null 2>&1 || need_apt+=(openssh-client)
# The PowerShell session's stand-in on the test nodes (tests/support/powershell_standin.rs).
[ -x /usr/bin/python3 ] || need_apt+=(python3)
# The signed-commit tests sign with GnuPG (tests/signed_commits.rs).
command -v gpg >/dev/null 2>&1 || need_apt+=(gnupg)
# tests/deploy_manifests.rs renders deploy/ with `kubectl kustomize`.
command -v kubectl >/dev/null 2>&1 || need_apt+=(kubernetes-client)
# Real readers of what winfleet writes: containerd pulls through rendered
# hosts.toml trees from distribution registries (tests/real_containerd.rs),
# systemd-analyze verifies every generated unit (tests/real_systemd.rs),
# promtool checks deploy/'s alerts (tests/deploy_monitoring.rs).
command -v containerd >/dev/null 2>&1 || need_apt+=(containerd)
command -v docker-registry >/dev/null 2>&1 || need_apt+=(docker-registry)
command -v htpasswd >/dev/null 2>&1 || need_apt+=(apache2-utils)
command -v curl >/dev/null 2>&1 || need_apt+=(curl)
command -v systemd-analyze >/dev/null 2>&1 || need_apt+=(systemd)
command -v promtool >/dev/null 2>&1 || need_apt+=(prometheus)
# windows_exporter's stand-in on the test nodes: node_exporter reads the same
# exporter-toolkit --web.config.file (tests/exporter_scrape.rs).
command -v prometheus-node-exporter >/dev/null 2>&1 || need_apt+=(prometheus-node-exporter)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "test: missing ${need_apt[*]}; install them (apt-get as root does it here), then run again" >&2
    exit 1
  fi
  phase "apt-get install ${need_apt[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi
if [ "${1:-}" = --install-only ]; then
  phase "what the tests need is installed"
  exit 0
fi
command -v go >/dev/null 2>&1 || {
  echo "test: go is not installed: the real-control-plane tests cannot run (Go 1.26: the Go module proxy builds tests/controlplane)" >&2
  exit 1
}

# The control plane builds in the background, beside the Rust build: 10 to
# 15 minutes with a cold Go cache on 2 cores, seconds once cached.
mkdir -p target/controlplane
go_log=target/controlplane-build.log
phase "go build tests/controlplane in the background (log: $go_log; a cold Go cache takes 10 to 15 minutes)"
(cd tests/controlplane && nice -n 10 go build -ldflags "$(cat ldflags)" -o ../../target/controlplane/controlplane . \
  > "../../$go_log" 2>&1) &
go_pid=$!
# machine-api-operator's MachineSet, Machine and nodelink controllers and its
# Machine and MachineSet admission webhooks, with the
# tests' cloud actuator (tests/real_cluster_machine_api.rs): its own Go
# module, built beside it; a cold Go cache took 11 minutes here, a warm one
# 20 seconds.
mkdir -p target/machineapi
mao_log=target/machineapi-build.log
phase "go build tests/machineapi in the background (log: $mao_log; a cold Go cache takes about 11 minutes)"
(cd tests/machineapi && nice -n 10 go build -o ../../target/machineapi/machineapi . > "../../$mao_log" 2>&1) &
mao_pid=$!
phase "cargo test --lib --bins --tests --no-run (the test binaries; from a fresh clone about 12 minutes)"
cargo test --lib --bins --tests --no-run
phase "the test binaries are built"
# wait_go PID LOG WHAT: waits for a background go build, a line a minute.
wait_go() {
  local waited=0
  while kill -0 "$1" 2>/dev/null; do
    if [ $((waited % 60)) -eq 0 ]; then phase "waiting for the go build of $3 ($(wc -l < "$2") lines of log)"; fi
    sleep 5
    waited=$((waited + 5))
  done
  if ! wait "$1"; then
    cat "$2" >&2
    echo "test: go build of $3 failed" >&2
    exit 1
  fi
}
wait_go "$go_pid" "$go_log" tests/controlplane
phase "the control plane is built"
wait_go "$mao_pid" "$mao_log" tests/machineapi
phase "the Machine API controllers are built"
# The tests need room of their own (each real control plane's etcd
# preallocates its log): say what is left, loudly when little is.
left=$(free_mb)
phase "disk: $left MB free after the builds"
if [ "$left" -lt 4096 ]; then
  echo "!!!!!!!! only $left MB free after the builds: the real control plane's etcd may not start !!!!!!!!" >&2
fi

phase "cargo test --lib --bins --tests -- --include-ignored (every test, nothing skipped)"
# The fake kubelet's entry points are #[ignore]d functions that the node
# tests start as processes; they are not tests.
rc=0
cargo test --no-fail-fast --lib --bins --tests "$@" -- --include-ignored --skip fake_kubelet_process || rc=$?
phase "done (exit code $rc; disk: $(free_mb) MB free)"
exit "$rc"
