# checkconf.sh DATA_DIR NAMED_CHECKCONF [-z] named.conf
# Run in a BIND pod by bind::commands::checkconf: named-checkconf from the
# data directory, so relative includes resolve as they do for named. Must
# never: change a file.
cd "$1" || exit 1
shift
exec "$@"
