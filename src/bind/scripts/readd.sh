# readd.sh RNDC RNDC_CONF CLAUSE ZONE [IN VIEW]
# Run in a BIND pod by bind::commands::readd_zone: `rndc delzone` (files
# kept) then `rndc addzone` with CLAUSE, in one exec. Must never: remove a
# file, take a value as script text (all come as arguments).
rndc="$1" conf="$2" clause="$3"
shift 3
"$rndc" -c "$conf" delzone "$@" || exit $?
exec "$rndc" -c "$conf" addzone "$@" "$clause"
