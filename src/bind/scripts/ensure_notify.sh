# ensure_notify.sh DATA_DIR  (after ensure_includes.sh)
# Run in a BIND pod by bind::commands::ensure_notify_files: creates the
# include files a view added at run time (or zone lists) name, so `rndc
# reconfig` does not fail on them. Must never: change a file that exists.
cd "$1" || exit 1
ensure_includes
