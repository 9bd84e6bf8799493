# read_keys.sh PREFIX  (no stdin)
# Run in a BIND pod by bind::commands::read_key_files: prints the key files
# named keeps for one signed zone in its key directory (PREFIX is
# DIR/K<zone>.+, the files PREFIX*.key, .private and .state) as `@@file
# NAME` then the file's lines, so the operator can keep them in the zone's
# Secret. Must never: print anything but those files (the operator never
# logs this output), write or remove anything.
set -eu
for f in "$1"*.key "$1"*.private "$1"*.state; do
    [ -f "$f" ] || continue
    printf '@@file %s\n' "${f##*/}"
    cat "$f"
done
