# write_notify.sh RNDC RNDC_CONF [LIST_FILE LIST_TEXT]...
# Run in a BIND pod by bind::commands::write_notify_targets and
# write_view_notify_targets: rewrites each NOTIFY list that differs from the
# wanted text, then one `rndc reconfig` when any did; prints
# @@notify-changed or @@notify-unchanged last. Must never: reconfig when
# nothing changed, take a value as script text. The lists hold addresses
# and key names only, never key material.
rndc="$1" conf="$2"
shift 2
changed=
while [ $# -gt 1 ]; do
    have=$(cat "$1" 2>/dev/null; echo .)
    if [ "$have" != "$2." ]; then
        { printf '%s' "$2" >"$1.tmp" && mv -f "$1.tmp" "$1"; } || exit 1
        changed=1
    fi
    shift 2
done
if [ -z "$changed" ]; then
    echo @@notify-unchanged
    exit 0
fi
"$rndc" -c "$conf" reconfig || exit $?
echo @@notify-changed
