# reconfig_when_mounted.sh DATA_DIR NAMED_CONF KEYS_CONF ENSURE RNDC ARGS...
# (after ensure_includes.sh; the wanted named.conf + keys.conf on stdin)
# Run in a BIND pod by bind::commands::reconfig_when_mounted: when the
# mounted files are byte for byte the wanted ones, creates missing include
# files (when ENSURE is not empty) and runs RNDC ARGS (the reconfig);
# prints @@not-mounted, @@reconfigured or @@reconfig-failed last. Must
# never: print or write the files it compares (keys.conf is key material).
cd "$1" || exit 1
named="$2" keys="$3" ensure="$4"
shift 4
want=$(cat; echo .) || exit 1
have=$(cat "$named" "$keys" && echo .) || exit 1
if [ "$have" != "$want" ]; then
    echo @@not-mounted
    exit 0
fi
if [ -n "$ensure" ]; then
    ensure_includes
fi
"$@" || { rc=$?; echo @@reconfig-failed; exit $rc; }
echo @@reconfigured
