#!/usr/bin/env bash
# The BIND 9.20 lane: runs the BIND-facing tests against BIND 9.20 from a
# Debian trixie chroot, beside the main run's 9.18 from the host.
#
# Usage: .ci/bind920.sh [--all | test filters...]
#   no argument  the BIND-facing modules (every one that starts named or
#                runs a BIND tool; see bind_facing below)
#   --all        the whole suite
#   filters      passed to the suite binary as they are (e.g. e2e_tsig::)
# Environment:
#   BIND920_ROOT    the chroot (default /var/tmp/bind920-trixie); made with
#                   debootstrap when it has no named yet, reused otherwise.
#   BIND920_MIRROR  the Debian mirror; default: the first one in this
#                   machine's apt sources, read at run time.
#
# The test binary and the bind-operator binary are built here (bookworm's
# glibc is older than trixie's, so they run there unchanged) and the
# repository is bind-mounted at the same absolute path inside the chroot:
# the paths compiled into the tests (CARGO_MANIFEST_DIR, CARGO_BIN_EXE_*)
# stay valid, and named, rndc, dig, nsupdate and named-checkconf come from
# the chroot's PATH, so they are 9.20's. Everything is mounted in a private
# mount namespace (unshare), so even a killed run leaves no mount behind on
# the host; the trap unmounts in order when the script ends.
set -euo pipefail
self=$(realpath "$0")
cd "$(dirname "$self")/.."
repo=$(pwd -P)

# The BIND-facing modules (see .ci/bind-facing.sh).
bind_facing() { "$repo/.ci/bind-facing.sh"; }

root=${BIND920_ROOT:-/var/tmp/bind920-trixie}
want=9.20
log() { echo "bind920: $*" >&2; }

# The first plain release mirror in the apt sources (deb822 .sources files
# or one-line .list files), never one of -security/-updates/-backports.
apt_mirror() {
    local f
    for f in /etc/apt/sources.list.d/*.sources; do
        [[ -f $f ]] || continue
        awk '
            function flush() { if (uri != "" && plain) { print uri; found = 1; exit } uri = ""; plain = 0 }
            /^[[:space:]]*$/ { flush(); next }
            /^URIs:/ { uri = $2 }
            /^Suites:/ { for (i = 2; i <= NF; i++) if ($i !~ /-/) plain = 1 }
            END { if (!found) flush() }
        ' "$f"
    done
    cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
        sed -E 's/\[[^]]*\]//' |
        awk '$1 == "deb" && $3 !~ /-/ { print $2 }' || true
}

[[ $(id -u) == 0 ]] || { log "needs root (debootstrap, mount, chroot)"; exit 2; }
# Everything below, debootstrap's own mounts included, happens in a private
# mount namespace: whatever way this script ends, the host keeps no mount.
if [[ -z ${BIND920_UNSHARED:-} ]]; then
    BIND920_UNSHARED=1 exec unshare --mount --propagation private bash "$self" "$@"
fi
t0=$(date +%s)

mounted=()
tmp=
# Every process of this run (the tests and each named they started) shares
# this script's private mount namespace; none may outlive the run.
stop_run() {
    local ns pid pids=()
    ns=$(readlink /proc/$$/ns/mnt)
    for pid in /proc/[0-9]*; do
        pid=${pid#/proc/}
        [[ $pid != "$$" && $(readlink "/proc/$pid/ns/mnt" 2>/dev/null) == "$ns" ]] && pids+=("$pid")
    done
    [[ ${#pids[@]} == 0 ]] || kill -TERM "${pids[@]}" 2>/dev/null || true
}
cleanup() {
    local i
    stop_run
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
        umount "${mounted[i]}" 2>/dev/null || umount -l "${mounted[i]}" || true
    done
    [[ -z $tmp ]] || rm -rf --one-file-system "$tmp" "$tmp.out" "$tmp.out.rc"
}
trap cleanup EXIT
trap 'log interrupted; exit 130' INT
trap 'log terminated; exit 143' TERM
mount_at() { # mount_at DIR MOUNT-ARGS...: DIR inside the chroot
    local dir=$root$1
    shift
    mkdir -p "$dir"
    mount "$@" "$dir"
    mounted+=("$dir")
}

if [[ ! -x $root/usr/sbin/named ]]; then
    [[ ! -e $root ]] || { log "$root exists but has no usr/sbin/named; remove it or set BIND920_ROOT"; exit 2; }
    mirror=${BIND920_MIRROR:-$(apt_mirror | head -1 || true)}
    [[ -n $mirror ]] || { log "no Debian mirror in the apt sources; set BIND920_MIRROR"; exit 2; }
    # A current keyring too: an old one cannot check trixie's Release.
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends debootstrap debian-archive-keyring >/dev/null
    log "debootstrap trixie into $root from $mirror"
    rm -rf --one-file-system "$root.new"
    mkdir -p "$(dirname "$root")"
    debootstrap --variant=minbase --include=bind9,bind9-utils,bind9-dnsutils \
        trixie "$root.new" "$mirror" >"$root.log" 2>&1 || {
        tail -20 "$root.log"
        log "debootstrap failed (log: $root.log)"
        exit 2
    }
    mv "$root.new" "$root"
    log "chroot ready in $(($(date +%s) - t0)) s"
fi

# Already built by the main run: this only finds the binary's path.
exe=$(cargo test --locked --test suite --no-run --message-format=json |
    grep '"name":"suite"' | grep -o '"executable":"[^"]*"' | cut -d'"' -f4 | tail -1)
[[ -x $exe ]] || { log "cannot find the suite binary (cargo test --no-run failed?)"; exit 2; }
target=$(cargo metadata --locked --format-version 1 --no-deps |
    grep -o '"target_directory":"[^"]*"' | cut -d'"' -f4)

mount_at /proc -t proc proc
mount_at /dev --bind /dev
# A private /tmp: the test data of this run, gone with it.
tmp=$(mktemp -d /var/tmp/bind920-tmp.XXXXXX)
chmod 1777 "$tmp"
mount_at /tmp --bind "$tmp"
mount_at "$repo" --bind "$repo"
case $target/ in
"$repo"/*) ;;
*) mount_at "$target" --bind "$target" ;;
esac

if [[ $# == 0 ]]; then
    mapfile -t filters < <(bind_facing | sort -u)
    set -- "${filters[@]}"
    log "modules: $*"
elif [[ $1 == --all ]]; then
    shift
fi

out=$tmp.out
# In the background so that a signal to this script stops the run at once
# (bash runs traps only between foreground commands); tee is the job's last
# process, so waiting for it means the log is complete.
(
    set +e
    chroot "$root" /usr/bin/env -i \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/root TMPDIR=/tmp LANG=C.UTF-8 RUST_BACKTRACE=1 \
        /bin/sh -c '
            v=$(named -v) || exit 2
            echo "bind920: inside the chroot: $v ($(command -v named), $(command -v dig))"
            case $v in "BIND $0."*) ;; *) echo "bind920: expected BIND $0, got: $v"; exit 2 ;; esac
            cd "$1" && shift && exec "$@"
        ' "$want" "$repo" "$exe" "$@" 2>&1
    echo $? >"$out.rc"
) | tee "$out" &
wait $! || true
rc=$(cat "$out.rc" 2>/dev/null || echo 1)

result=$(grep -E '^test result:' "$out" | tail -1 || true)
version=$(grep -o 'BIND 9[.0-9]*' "$out" | head -1 || true)
secs=$(($(date +%s) - t0))
# A filter that matches nothing must not pass as a green lane.
if [[ $rc == 0 && ! $result =~ \ ([1-9][0-9]*)\ passed ]]; then
    echo "bind920: no test ran (filters: $*)"
    rc=1
fi
if [[ $rc == 0 ]]; then
    echo "bind920: PASS on ${version:-BIND $want} in ${secs} s: ${result#test result: }"
else
    echo "bind920: FAIL (exit $rc) on ${version:-BIND $want} in ${secs} s: ${result#test result: }"
fi
exit "$rc"
