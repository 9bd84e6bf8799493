#!/bin/sh
# Rendered by bind-operator. Starts named for one BindCluster pod: StatefulSet
# ordinal 0 is the primary, every other ordinal a secondary.
#
# named runs as whatever user the pod runs as (uid 53 by default), so no
# `-u`: every file it writes lives under $DATA, a writable volume whose group
# is the pod's fsGroup; the root filesystem may be read-only. Its ports are
# unprivileged (the Services map 53 to them), so it needs no capability.
#
# named.conf is a symlink into the mounted config directory, never a copy, so
# `rndc reconfig` re-reads what kubelet keeps current. Everything that differs
# per pod (ports, listen address) goes into small files written here, which
# named.conf includes by relative path from the data directory.
set -eu

DATA="${BIND_DATA_DIR:-/var/lib/bind}"
CONF="${BIND_CONFIG_DIR:-/etc/bind/operator}"
DNS_PORT="${BIND_DNS_PORT:-5353}"
CONTROL_PORT="${BIND_CONTROL_PORT:-8953}"
STATS_PORT="${BIND_STATS_PORT:-8053}"
LISTEN="${BIND_LISTEN_ADDRESS:-any}"
# shellcheck disable=SC3028 # HOSTNAME: set by the container runtime
ORDINAL="${POD_ORDINAL:-${HOSTNAME##*-}}"

fail() {
    echo "entrypoint: $*" >&2
    exit 64
}
case "$DNS_PORT" in '' | *[!0-9]*) fail "BIND_DNS_PORT must be a port number" ;; esac
case "$CONTROL_PORT" in '' | *[!0-9]*) fail "BIND_CONTROL_PORT must be a port number" ;; esac
case "$STATS_PORT" in '' | *[!0-9]*) fail "BIND_STATS_PORT must be a port number (0: off)" ;; esac
case "$ORDINAL" in '' | *[!0-9]*) fail "cannot tell the StatefulSet ordinal from POD_ORDINAL or HOSTNAME" ;; esac
case "$LISTEN" in any) ;; '' | *[!0-9a-fA-F.:]*) fail "BIND_LISTEN_ADDRESS must be any or an IP address" ;; esac
case "$DATA$CONF" in *'"'* | *\\*) fail "BIND_DATA_DIR and BIND_CONFIG_DIR must not contain quotes or backslashes" ;; esac

if [ "$ORDINAL" -eq 0 ]; then ROLE=primary; else ROLE=secondary; fi

mkdir -p "$DATA/zones" "$DATA/catalog"
cd "$DATA"
ln -sfn "$CONF" config
ln -sfn "config/named.conf.$ROLE" named.conf

if [ "$LISTEN" = any ]; then
    V4=any
    V6=any
else
    case "$LISTEN" in
    *:*) V4=none V6="$LISTEN" ;;
    *) V4="$LISTEN" V6=none ;;
    esac
fi
cat >pod-listen.conf.tmp <<EOF
listen-on port $DNS_PORT { $V4; };
listen-on-v6 port $DNS_PORT { $V6; };
EOF
mv -f pod-listen.conf.tmp pod-listen.conf

# rndc only ever runs inside the pod, so the control channel stays on loopback.
cat >pod-controls.conf.tmp <<EOF
controls {
	inet 127.0.0.1 port $CONTROL_PORT allow { 127.0.0.1; } keys { "rndc-key"; };
};
EOF
mv -f pod-controls.conf.tmp pod-controls.conf

# named's statistics channel (JSON over HTTP), read by the operator: on the
# pod's own address, counters and zone serials but no record data. In a
# cluster the operator reaches it on the pod IP; a NetworkPolicy (see
# docs/metrics.md) keeps everyone else out.
if [ "$STATS_PORT" -eq 0 ]; then
    : >pod-statistics.conf.tmp
else
    if [ "$LISTEN" = any ]; then
        STATS_ON='*' STATS_ALLOW=any
    else
        STATS_ON="$LISTEN" STATS_ALLOW="$LISTEN"
    fi
    cat >pod-statistics.conf.tmp <<EOF
statistics-channels {
	inet $STATS_ON port $STATS_PORT allow { $STATS_ALLOW; };
};
EOF
fi
mv -f pod-statistics.conf.tmp pod-statistics.conf

cat >rndc.conf.tmp <<EOF
include "$DATA/config/rndc.key";
options {
	default-key "rndc-key";
	default-server 127.0.0.1;
	default-port $CONTROL_PORT;
};
EOF
mv -f rndc.conf.tmp rndc.conf

# The primary's NOTIFY targets are runtime data the operator writes; start
# with none, and keep what a previous run left on a persistent volume.
[ -e notify-targets.conf ] || echo 'also-notify { };' >notify-targets.conf
# The primary's secondaries as named server lists (for zones with their own
# external secondaries): none until the operator writes them.
[ -e notify-servers.conf ] || : >notify-servers.conf
# With views, each view of the primary includes its own list instead
# (notify-targets.<view>.conf): start every one named.conf names.
# shellcheck disable=SC2013 # the names are [A-Za-z0-9_.-]: no blank, no glob
for f in $(sed -n 's/^[[:space:]]*include "\(notify-targets\.[A-Za-z0-9_.-]*\.conf\)";$/\1/p' named.conf); do
    [ -e "$f" ] || echo 'also-notify { };' >"$f"
done
# The primary's zone lists are runtime data too (the operator rebuilds them
# from zones.d/): start empty, keep what a persistent volume holds.
[ -e primary-zones.conf ] || : >primary-zones.conf
# shellcheck disable=SC2013 # the names are [A-Za-z0-9_.-]: no blank, no glob
for f in $(sed -n 's/^[[:space:]]*include "\(primary-zones\.[A-Za-z0-9_.-]*\.conf\)";$/\1/p' named.conf); do
    [ -e "$f" ] || : >"$f"
done

if [ "${BIND_PREPARE_ONLY:-0}" = 1 ]; then
    exit 0
fi
exec "${BIND_NAMED:-named}" -g -c "$DATA/named.conf"
