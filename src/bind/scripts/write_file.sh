# write_file.sh PATH  (zone text on stdin)
# Run in a BIND pod by bind::commands::write_zone_file: writes the zone file
# atomically (tmp + mv), removing a stale journal and inline-signing copies
# first. Must never: remove key files (a zone keeps its DS), write key
# material (a zone file holds none).
set -e
f="$1"
mkdir -p "$(dirname "$f")"
rm -f "$f.jnl" "$f.jbk" "$f.signed" "$f.signed.jnl"
cat >"$f.tmp"
mv -f "$f.tmp" "$f"
