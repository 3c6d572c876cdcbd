#!/usr/bin/env bash
# The winfleet demo: validate and render the bundled examples-repo, then
# plan a pull request against it, as CI would on a real config repository.
# Works on a fresh machine with the Rust toolchain; installs git if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v git >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq git; }

cargo build --release --quiet
winfleet=$PWD/target/release/winfleet
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

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
echo "== the node engine on a local demo fleet (real sshd nodes on loopback)"
command -v /usr/sbin/sshd >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq --no-install-recommends openssh-server openssh-sftp-server; }
cargo run --release --quiet --example demo-fleet -- "$winfleet" 3
