# delzone.sh RNDC RNDC_CONF ZONE_FILE KEY_PREFIX ZONE [IN VIEW]
# Run in a BIND pod by bind::commands::delzone: `rndc delzone` the zone, then
# remove its zone file, journal, inline-signing copies and K* key files.
# Exits with rndc's status. Must never: take a value as script text (all
# come as arguments), remove anything but the named zone's files.
rndc="$1" conf="$2" file="$3" keys="$4"
shift 4
"$rndc" -c "$conf" delzone "$@"
rc=$?
rm -f "$file" "$file.jnl" "$file.jbk" "$file.signed" "$file.signed.jnl" \
    "$keys"*.key "$keys"*.private "$keys"*.state
exit $rc
