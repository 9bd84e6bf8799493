# dig_key_on_stdin.sh DIG ARGS...  (a TSIG key clause on stdin)
# Run in a BIND pod by bind::commands::dig_axfr and dig_dnskey: dig signed
# with the key it reads from /dev/stdin (the exec's stdin pipe). Must never:
# put key material in a file, argv or the environment.
exec "$@" -k /dev/stdin
