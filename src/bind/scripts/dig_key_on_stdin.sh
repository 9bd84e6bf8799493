# dig_key_on_stdin.sh DIG ARGS...  (a TSIG key clause on stdin)
# Run in a BIND pod by bind::commands::dig_axfr and dig_dnskey: dig signed
# with the key on stdin, which reaches dig's -k through a FIFO in a private
# temporary directory (a pipe: the key is never stored). Not /dev/stdin:
# the exec's stdin pipe belongs to whoever made it (root), so a pod running
# as uid 53 cannot open it again by name. Must never: put key material in a
# stored file, argv or the environment; leave the writer behind.
umask 077
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
mkfifo "$d/key" || exit 1
# A background command reads /dev/null unless told otherwise: fd 3 carries
# stdin to it.
exec 3<&0
cat <&3 >"$d/key" 3<&- &
w=$!
exec 3<&-
"$@" -k "$d/key"
rc=$?
kill "$w" 2>/dev/null
exit $rc
