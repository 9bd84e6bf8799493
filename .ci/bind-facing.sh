#!/usr/bin/env bash
# Prints the suite filters of the BIND-facing test modules, one a line:
# every module that starts named (through the local runtime, the e2e
# binary, the bench or the bind harness) or runs a BIND tool itself. Used by
# the lanes that run those modules again under other conditions
# (.ci/bind920.sh: BIND 9.20; .ci/busybox.sh: BusyBox tools, ISC's PATH).
#
# Running each module once with logging wrappers for the BIND tools first
# in PATH found exactly the modules the scan below picks (15 of 46); the
# others use the in-memory API and fake executors only. The scan keeps a
# new module in the lanes without anyone editing this list; the fixed names
# are a floor in case the support modules are renamed.
set -euo pipefail
cd "$(dirname "$0")/.."
{
    printf '%s\n' bind_golden:: bind_named:: controller_zone_named:: e2e_ local_runtime_
    for f in tests/*.rs; do
        m=$(basename "$f" .rs)
        case $m in suite | e2e_* | local_runtime_*) continue ;; esac
        if grep -qE '\bsupport_(local|e2e|bind)\b|local::bench|LocalRuntime|Command::new\("(dig|named|named-checkconf|rndc|nsupdate|delv)"\)' "$f"; then
            echo "$m::"
        fi
    done
} | sort -u
