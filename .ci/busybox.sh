#!/usr/bin/env bash
# The BusyBox lanes: what ISC's image (internetsystemsconsortium/bind9, built
# FROM alpine) gives the operator's pod scripts is BusyBox sh, awk, sed and
# the rest; these lanes run the tests that start named under that.
#
# Usage: .ci/busybox.sh [--isc-path] [test filters...]
#   (default)   the BIND-facing modules (.ci/bind-facing.sh), with Debian's
#               busybox first on PATH as sh and as every other tool the pod
#               scripts (src/bind/scripts/*.sh) run; the rest of PATH as is.
#               Ends with `busybox: PASS|FAIL ... N passed`.
#   --isc-path  the e2e modules (e2e_), with a PATH holding only what ISC's
#               image has: named, rndc, named-checkconf, dig, nsupdate and
#               every BusyBox applet; a dependency on a Debian-only tool
#               shows as a failure. Ends with `isc-path: PASS|FAIL ...`.
#   filters     passed to the suite binary instead of the modules.
#
# How the scripts reach busybox: the local runtime starts each pod's
# entrypoint as `sh SCRIPT` and the local executor runs `sh -c ...`, both
# resolved through PATH (which the executor and the pods inherit), as the
# test harness does; every tool a script runs by bare name resolves there
# too. The `sh` here is a two-line wrapper that counts its runs in a file
# and execs `/bin/busybox sh`, so the final line also says how many shells
# ran under BusyBox (a lane where none did fails).
set -euo pipefail
self=$(realpath "$0")
cd "$(dirname "$self")/.."

lane=busybox
if [[ ${1:-} == --isc-path ]]; then
    lane=isc-path
    shift
fi
log() { echo "$lane: $*" >&2; }
t0=$(date +%s)

busybox=$(command -v busybox || true)
[[ -x $busybox ]] || { log "needs busybox (apt-get install busybox)"; exit 2; }
busybox=$(realpath "$busybox")

# BUSYBOX_SUITE: a suite binary built already (default: built here).
exe=${BUSYBOX_SUITE:-$(cargo test --locked --test suite --no-run --message-format=json |
    grep '"name":"suite"' | grep -o '"executable":"[^"]*"' | cut -d'"' -f4 | tail -1)}
[[ -x $exe ]] || { log "cannot find the suite binary (cargo test --no-run failed?)"; exit 2; }

tmp=$(mktemp -d /tmp/bind-operator-busybox.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# Pods may run as another user (the local runtime switches to the pod's
# user when it can): the tools and the counter must be usable by anyone.
chmod 755 "$tmp"
bin=$tmp/bin
mkdir "$bin"
count=$tmp/sh-runs
: >"$count"
chmod 666 "$count"
printf '#!%s sh\nprintf . >>%s\nexec %s sh "$@"\n' "$busybox" "$count" "$busybox" >"$bin/sh"
chmod 755 "$bin/sh"

if [[ $lane == busybox ]]; then
    # The tools the pod scripts run by bare name (the shell's builtins
    # aside), checked against the scripts below.
    applets=(awk cat dirname grep ln mkdir mktemp mv rm sed xargs)
    path=$bin:$PATH
else
    mapfile -t applets < <("$busybox" --list | grep -vx sh)
    path=$bin
    for t in named rndc named-checkconf dig nsupdate; do
        p=$(PATH=/usr/sbin:/usr/bin:/sbin:/bin command -v "$t") || { log "no $t on this machine"; exit 2; }
        ln -s "$p" "$bin/$t"
    done
fi
for a in "${applets[@]}"; do
    "$busybox" "$a" --help >/dev/null 2>&1 || [[ $? != 127 ]] || { log "busybox has no $a"; exit 2; }
    ln -s "$busybox" "$bin/$a"
done

if [[ $# == 0 ]]; then
    if [[ $lane == busybox ]]; then
        mapfile -t filters < <(.ci/bind-facing.sh)
    else
        filters=(e2e_)
    fi
    set -- "${filters[@]}"
fi
log "modules: $*"
log "PATH=$path ($(PATH=$path command -v sh) -> $busybox)"

out=$tmp/out
set +e
PATH=$path "$exe" "$@" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
set -e

result=$(grep -E '^test result:' "$out" | tail -1 || true)
runs=$(wc -c <"$count")
secs=$(($(date +%s) - t0))
if [[ $rc == 0 && ! $result =~ \ ([1-9][0-9]*)\ passed ]]; then
    echo "$lane: no test ran (filters: $*)"
    rc=1
fi
if [[ $rc == 0 && $runs == 0 ]]; then
    echo "$lane: no shell ran under busybox (is sh resolved through PATH?)"
    rc=1
fi
verdict=PASS
[[ $rc == 0 ]] || verdict="FAIL (exit $rc)"
echo "$lane: $verdict in ${secs} s, $runs shells under $("$busybox" | head -1 | cut -d' ' -f1-2): ${result#test result: }"
exit "$rc"
