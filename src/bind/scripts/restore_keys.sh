# restore_keys.sh DIR  (key files on stdin: `@@file NAME` then its lines)
# Run in a BIND pod by bind::commands::restore_key_files before a signed
# zone is created on a primary that lacks it: puts the zone's kept key
# files back into DIR, the key directory named loads them from, so the zone
# is signed with the keys its DS at the parent points at. A file already
# there is left alone (a persistent volume kept it; named may have moved it
# on). Each file is written owner-only to NAME.tmp, then moved into place.
# Prints `@@restored NAME` per file written. Must never: write outside DIR
# or any name but K*.key, K*.private, K*.state (refused, exit 2), print key
# material, take a value as script text.
set -eu
cd "$1"
umask 077
f=
finish() {
    [ -n "$f" ] || return 0
    if [ -e "$f" ]; then
        rm -f "$f.tmp"
    else
        mv -f "$f.tmp" "$f"
        printf '@@restored %s\n' "$f"
    fi
}
while IFS= read -r line || [ -n "$line" ]; do
    case $line in
    "@@file "*)
        finish
        f=${line#@@file }
        case $f in
        */* | .*) echo "restore_keys: refused file name" >&2 && exit 2 ;;
        K*.key | K*.private | K*.state) ;;
        *) echo "restore_keys: refused file name" >&2 && exit 2 ;;
        esac
        : >"$f.tmp"
        ;;
    *)
        [ -n "$f" ] || { echo "restore_keys: data before the first file" >&2 && exit 2; }
        printf '%s\n' "$line" >>"$f.tmp"
        ;;
    esac
done
finish
