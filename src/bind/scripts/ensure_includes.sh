# ensure_includes.sh: a fragment, the start of ensure_notify.sh and of
# reconfig_when_mounted.sh (bind::commands joins them with concat!).
# Defines ensure_includes: in the data directory, creates (empty) every
# NOTIFY list and zone list file named.conf includes that is missing, as the
# entrypoint does at start. Must never: change a file that exists.
ensure_includes() {
    [ -e notify-servers.conf ] || : >notify-servers.conf || exit 1
    # shellcheck disable=SC2013 # the names are [A-Za-z0-9_.-]: no blank, no glob
    for f in $(sed -n 's/^[[:space:]]*include "\(notify-targets\.[A-Za-z0-9_.-]*\.conf\)";$/\1/p' named.conf); do
        [ -e "$f" ] || echo 'also-notify { };' >"$f" || exit 1
    done
    # shellcheck disable=SC2013 # the names are [A-Za-z0-9_.-]: no blank, no glob
    for f in $(sed -n 's/^[[:space:]]*include "\(primary-zones\.[A-Za-z0-9_.-]*\.conf\)";$/\1/p' named.conf); do
        [ -e "$f" ] || : >"$f" || exit 1
    done
}
