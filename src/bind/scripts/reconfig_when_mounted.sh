# reconfig_when_mounted.sh DATA_DIR NAMED_CONF KEYS_CONF ENSURE N [FILE TEXT]... RNDC ARGS...
# (after ensure_includes.sh; the wanted named.conf + keys.conf on stdin)
# Run in a BIND pod by bind::commands::reconfig_when_mounted: when the
# mounted files are byte for byte the wanted ones, creates missing include
# files (when ENSURE is not empty), writes each of the N FILE TEXT pairs
# (the primary's NOTIFY lists, which name the keys of the new keys.conf)
# that differs, and runs RNDC ARGS (the reconfig); prints @@not-mounted,
# @@reconfigured or @@reconfig-failed last. Must never: print or write the
# files it compares (keys.conf is key material), take a value as script
# text.
cd "$1" || exit 1
named="$2" keys="$3" ensure="$4" n="$5"
shift 5
want=$(cat; echo .) || exit 1
have=$(cat "$named" "$keys" && echo .) || exit 1
if [ "$have" != "$want" ]; then
    echo @@not-mounted
    exit 0
fi
if [ -n "$ensure" ]; then
    ensure_includes
fi
while [ "$n" -gt 0 ]; do
    old=$(cat "$1" 2>/dev/null; echo .)
    if [ "$old" != "$2." ]; then
        { printf '%s' "$2" >"$1.tmp" && mv -f "$1.tmp" "$1"; } || exit 1
    fi
    shift 2
    n=$((n - 1))
done
"$@" || { rc=$?; echo @@reconfig-failed; exit $rc; }
echo @@reconfigured
