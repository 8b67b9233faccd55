#!/usr/bin/env bash
# Installs what Oscar needs and a fresh Debian machine may lack: libuv1-dev,
# libssl-dev and pkg-config (Debian packages). Checks the Swift toolchain is there. Idempotent.
# Sourced by quickstart.sh and test.sh.
set -euo pipefail

oscar_bootstrap() {
  if ! command -v swift >/dev/null 2>&1; then
    echo "oscar: a Swift 6 toolchain is required (swift not found on PATH)" >&2
    return 1
  fi
  local need=()
  command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
  if ! pkg-config --exists libuv 2>/dev/null; then need+=(libuv1-dev); fi
  if ! pkg-config --exists openssl 2>/dev/null; then need+=(libssl-dev); fi
  if ((${#need[@]})); then
    echo "oscar: installing ${need[*]} (Debian packages)" >&2
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
  fi
}

# For the test suite only: dnsmasq (Debian's dnsmasq-base), the DNS server
# the seed-discovery test runs inside network namespaces. That test needs
# root anyway, so this installs only as root, and a failure only skips it.
oscar_bootstrap_test_tools() {
  [ "$(id -u)" -eq 0 ] || return 0
  command -v dnsmasq >/dev/null 2>&1 || [ -x /usr/sbin/dnsmasq ] && return 0
  echo "oscar: installing dnsmasq-base (Debian package) for the DNS seed-discovery test" >&2
  { env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
    env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends dnsmasq-base; } >&2 ||
    echo "oscar: could not install dnsmasq-base; the DNS seed-discovery test will be skipped" >&2
}
