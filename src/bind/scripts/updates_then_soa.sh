# updates_then_soa.sh NSUPDATE [DIG ARGS...]  (nsupdate scripts on stdin,
# parts separated by `@@part` lines)
# Run in a BIND pod by bind::commands::nsupdate_then_soa: runs one
# `nsupdate -v` per part at once, prints each part's stdout, `@@stderr`, its
# stderr, `@@end-part`, then `@@nsupdate`, then runs DIG ARGS (the SOA read
# back) when given. Must never: write key material to a file, argv or the
# environment: the parts go to a private temporary directory with each
# `key` line replaced by `@@key K`; the key lines stay in this shell's
# memory and reach each nsupdate through pipes (printf is a shell builtin).
n="$1"
shift
umask 077
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
keys=$(awk -v dir="$out" 'BEGIN { f = dir "/p0" }
    $0 == "@@part" { close(f); i++; f = dir "/p" i; next }
    $1 == "key" { if (!($0 in k)) { k[$0] = ++nk; print }; print "@@key " k[$0] > f; next }
    { print > f }') || exit 1
for p in "$out"/p*; do
  printf '%s\n' "$keys" |
    awk 'FNR == NR { k[FNR] = $0; next } $1 == "@@key" { print k[$2]; next } { print }' - "$p" |
    "$n" -v >"$p.out" 2>"$p.err" &
done
wait
for p in "$out"/p*[0-9]; do
  cat "$p.out"
  echo "@@stderr"
  cat "$p.err"
  echo "@@end-part"
done
echo "@@nsupdate"
[ "$#" -gt 0 ] || exit 0
"$@"
