#!/usr/bin/env bash
# The Debian packages the demo still needs, one a line, for
# `apt-get install`: only what is missing (scripts/demo.sh installs them).
# OpenSSH's server must match its client's version exactly, so a missing
# server is asked for at the version of the client the host already has:
# apt-get then installs it beside the client instead of upgrading the
# client. WINFLEET_DEMO_SSHD and WINFLEET_DEMO_SFTP_SERVER name where the
# programs are looked for (tests/demo_packages.rs).
set -euo pipefail

sshd=${WINFLEET_DEMO_SSHD:-/usr/sbin/sshd}
sftp_server=${WINFLEET_DEMO_SFTP_SERVER:-/usr/lib/openssh/sftp-server}

# The installed version of a package, or nothing.
installed() { dpkg-query -W -f='${Status} ${Version}' "$1" 2>/dev/null | sed -n 's/^install ok installed //p'; }

# A package, at the installed client's version when there is one.
openssh() {
  local client
  client=$(installed openssh-client)
  if [ -n "$client" ]; then echo "$1=$client"; else echo "$1"; fi
}

command -v git >/dev/null 2>&1 || echo git
command -v cc >/dev/null 2>&1 || echo gcc
command -v pkg-config >/dev/null 2>&1 || echo pkg-config
# OpenSSL is built from source (openssl-src): perl with its core modules, make.
perl -MIPC::Cmd -e 1 >/dev/null 2>&1 || echo perl
command -v make >/dev/null 2>&1 || echo make
[ -x "$sshd" ] || openssh openssh-server
[ -x "$sftp_server" ] || openssh openssh-sftp-server
command -v ssh-keygen >/dev/null 2>&1 || echo openssh-client
