# apply_zones.sh RNDC RNDC_CONF NAMED_CHECKCONF DATA_DIR  (zones on stdin)
# Run in a BIND pod by bind::commands::apply_zones (its doc lists the steps):
# writes new zones' files and every zone's stanza file, rebuilds the zone
# lists, checks them with named-checkconf, migrates zones out of named's
# new-zone database, reconfigures once and removes the files of zones that
# went; undoes every stanza change when named-checkconf or the reconfig
# refuses. Prints `@@zone K RESULT`, the error, `@@end` per zone (or
# `@@checkconf` ... and exit 3). Must never: take a value as script text
# (zone values come on stdin and live in variables set with eval from
# `read`, never from their text), leave a list named would refuse, write
# key material (zone texts hold none).
# Per-zone values are set and read through eval (res_K, zone_K, ...), which
# the linter cannot follow, hence SC2034 and SC2154 off for this file.
# shellcheck disable=SC2034,SC2154
rndc="$1" conf="$2" checkconf="$3"
cd "$4" || exit 1
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
build() {
  l=$1
  set -- "$2"/*.conf
  if [ -e "$1" ]; then
    printf '%s\n' "$@" | xargs cat >"$l.tmp" || return 1
  else
    : >"$l.tmp" || return 1
  fi
  mv -f "$l.tmp" "$l"
}
rebuild() {
  build primary-zones.conf zones.d || return 1
  for d in zones.d/*/; do
    [ -d "$d" ] || continue
    v=${d#zones.d/}
    v=${v%/}
    build "primary-zones.$v.conf" "zones.d/$v" || return 1
  done
}
listing() {
  printf '@@list primary-zones.conf\n'
  printf '%s\n' zones.d/*.conf
  for d in zones.d/*/; do
    [ -d "$d" ] || continue
    v=${d#zones.d/}
    v=${v%/}
    printf '@@list primary-zones.%s.conf\n' "$v"
    printf '%s\n' "zones.d/$v"/*.conf
  done
}
rollback() {
  k=0
  while [ "$k" -lt "$n" ]; do
    k=$((k + 1))
    eval "r=\$res_$k s=\$sf_$k f=\$file_$k"
    case $r in
      NEW|NEWBARE) rm -f "$s" "$f" ;;
      MIGRATE) rm -f "$s" ;;
      CHANGED|REMOVED) mv -f "$s.prev" "$s" ;;
    esac
  done
  rebuild
}
fail_changed() {
  k=0
  while [ "$k" -lt "$n" ]; do
    k=$((k + 1))
    eval "r=\$res_$k o=\$op_$k"
    case $r/$o in
      NEW/*|NEWBARE/*|MIGRATE/*|MIGRATED/*|CHANGED/*|REMOVED/*|*/force) eval "res_$k=FAIL err_$k=\$1" ;;
    esac
  done
}
included=
grep -q '^[[:space:]]*include "primary-zones[.A-Za-z0-9_-]*conf";' named.conf </dev/null && included=1
# One awk pass splits stdin (a shell `read` costs a syscall per byte): each
# zone's values and stanza to meta, the zone texts to one file.
awk -v meta="$out/meta" -v texts="$out/texts" -v bare="$out/bare" '
BEGIN { printf "" > bare }
/^@@(zone|stanza) [0-9]+$/ { f = meta; next }
/^@@(text|bare) [0-9]+$/ { f = texts; print > f; if ($1 == "@@bare") print $2 > bare; next }
f != "" { print > f }' || exit 1
check=
while IFS= read -r k; do eval "bare_$k=1" check=1; done <"$out/bare"
n=0 changed='' force='' migrate=''
while IFS= read -r op && IFS= read -r zone && IFS= read -r view &&
    IFS= read -r sf && IFS= read -r file && IFS= read -r keys &&
    IFS= read -r stanza; do
  n=$((n + 1))
  res='' err=''
  [ -n "$included" ] || op='wait'
  case $op in
    put|force)
      [ "$op" = put ] || force=1
      if [ -e "$sf" ]; then
        old=
        IFS= read -r old <"$sf" || :
        if [ "$old" = "$stanza" ]; then
          res=LISTED
        elif printf '%s\n' "$old" >"$sf.prev" && printf '%s\n' "$stanza" >"$sf"; then
          res=CHANGED changed=1
        else
          res=FAIL err="cannot write $sf"
        fi
      else
        fresh=yes
        for s in "" .jnl .jbk .signed .signed.jnl; do
          [ ! -e "$file$s" ] || fresh=
        done
        for d in "${sf%/*}" "${file%/*}"; do
          [ -d "$d" ] || mkdir -p "$d" </dev/null || res=FAIL err="cannot create $d"
        done
        if [ -z "$res" ]; then
          if [ -n "$fresh" ]; then
            res=NEW
            printf '%s\n%s\n' "$n" "$file" >&4
          else
            res=MIGRATE migrate=1
            printf '%s\n%s\n' "$n" "$out/$n.text" >&4
          fi
          if printf '%s\n' "$stanza" >"$sf"; then changed=1; else res=FAIL err="cannot write $sf"; fi
        fi
      fi ;;
    del)
      if [ ! -e "$sf" ]; then
        res=UNLISTED
      elif mv -f "$sf" "$sf.prev"; then
        res=REMOVED changed=1
      else
        res=FAIL err="cannot remove $sf"
      fi ;;
    wait) res=FAIL err="named.conf does not include the zone lists yet (its new version is not mounted yet)" ;;
    *) res=FAIL err="unknown operation" ;;
  esac
  eval "op_$n=\$op zone_$n=\$zone view_$n=\$view sf_$n=\$sf file_$n=\$file keys_$n=\$keys res_$n=\$res err_$n=\$err"
done <"$out/meta" 4>"$out/copy"
# Writes the `@@SECTION K` sections of the texts whose K the map (K, then
# the path, a line each) names, each to its path: one process for all zones.
place() {
  [ -s "$2" ] || return 0
  awk -v want="@@$1" 'FNR == NR { if (FNR % 2) k = $0; else dest[k] = $0; next }
    /^@@(text|bare) [0-9]+$/ { if (f != "") close(f); f = ""; if ($1 == want && ($2 in dest)) f = dest[$2]; next }
    f != "" { print > f }' "$2" "$out/texts" </dev/null
}
if ! place text "$out/copy"; then
  k=0
  while [ "$k" -lt "$n" ]; do
    k=$((k + 1))
    eval "r=\$res_$k s=\$sf_$k f=\$file_$k"
    case $r in
      NEW) rm -f "$s" "$f"; eval "res_$k=FAIL err_$k=\"cannot write \$f\"" ;;
      MIGRATE) rm -f "$s"; eval "res_$k=FAIL err_$k=\"cannot write the text of \$f\"" ;;
    esac
  done
fi
# New zones with a bare skeleton: loaded once by named-checkconf -z; a file
# it refuses is replaced by the bare skeleton.
if [ -n "$check" ]; then
  k=0
  while [ "$k" -lt "$n" ]; do
    k=$((k + 1))
    eval "r=\$res_$k z=\$zone_$k f=\$file_$k b=\$bare_$k"
    if [ "$r" != NEW ] || [ -z "$b" ]; then continue; fi
    printf 'view "c%s" { zone "%s" { type primary; file "%s/%s"; check-integrity no; }; };\n' \
        "$k" "$z" "$PWD" "$f"
    printf '%s\n%s\n' "$k" "$PWD/$f" >&5
  done >"$out/check.conf" 5>"$out/checked"
  if ! "$checkconf" -z "$out/check.conf" >"$out/check.out" 2>&1 </dev/null; then
    # Per refused file: its K and path to `refused` (for place), checkconf's
    # lines about it to K.why.
    awk -v dir="$out" -v pwd="$PWD" 'FNR == NR { if (FNR % 2) k = $0; else at[$0] = k; next }
      { p = $0; sub(/^(dns_master_load|dns_rdata_fromtext): /, "", p)
        if (index(p, "loading from master file ")) { sub(/.*loading from master file /, "", p); sub(/ failed: .*/, "", p); bad[p] = 1 }
        else sub(/:[0-9]+: .*/, "", p)
        if (p in at) why[p] = why[p] $0 "\n" }
      END { for (p in bad) if (p in at) { printf "%s\n%s\n", at[p], substr(p, length(pwd) + 2); printf "%s", why[p] > (dir "/" at[p] ".why") } }' \
        "$out/checked" "$out/check.out" >"$out/refused" </dev/null
    if place bare "$out/refused"; then
      while IFS= read -r k && IFS= read -r f; do
        e=
        while IFS= read -r l; do e="$e$l
"; done <"$out/$k.why"
        eval "res_$k=NEWBARE err_$k=\$e"
      done <"$out/refused"
    fi
  fi
fi
if [ -n "$changed" ]; then
  if ! rebuild; then
    rollback
    fail_changed "cannot write the zone lists"
    changed='' force=''
  elif ! msg=$("$checkconf" named.conf </dev/null 2>&1); then
    printf '@@checkconf\n%s\n' "$msg"
    listing
    rollback
    exit 3
  fi
fi
if [ -n "$migrate" ]; then
  relist=
  k=0
  while [ "$k" -lt "$n" ]; do
    k=$((k + 1))
    eval "r=\$res_$k"
    [ "$r" = MIGRATE ] || continue
    eval "z=\$zone_$k v=\$view_$k s=\$sf_$k f=\$file_$k"
    if [ -n "$v" ]; then set -- "$z" IN "$v"; else set -- "$z"; fi
    if e=$("$rndc" -c "$conf" delzone "$@" 2>&1 >/dev/null </dev/null); then
      eval "res_$k=MIGRATED"
    else
      case "$e" in
        *"not found"*|*"no matching zone"*)
          rm -f "$f.jnl" "$f.jbk" "$f.signed" "$f.signed.jnl"
          if mv -f "$out/$k.text" "$f"; then
            eval "res_$k=NEW"
          else
            rm -f "$s"
            eval "res_$k=FAIL err_$k=\"cannot write \$f\""
            relist=1
          fi ;;
        *)
          rm -f "$s"
          eval "res_$k=FAIL err_$k=\$e"
          relist=1 ;;
      esac
    fi
  done
  [ -z "$relist" ] || rebuild
fi
if [ -n "$changed$force" ] && ! e=$("$rndc" -c "$conf" reconfig 2>&1 >/dev/null </dev/null); then
  rollback
  fail_changed "$e"
fi
: >"$out/rm"
k=0
while [ "$k" -lt "$n" ]; do
  k=$((k + 1))
  eval "r=\$res_$k z=\$zone_$k v=\$view_$k s=\$sf_$k f=\$file_$k kp=\$keys_$k"
  case $r in
    CHANGED) printf '%s\n' "$s.prev" >>"$out/rm" ;;
    UNLISTED)
      if [ -n "$v" ]; then set -- "$z" IN "$v"; else set -- "$z"; fi
      if e=$("$rndc" -c "$conf" delzone "$@" 2>&1 >/dev/null </dev/null); then
        eval "res_$k=REMOVED"
      else
        case "$e" in
          *"not found"*|*"no matching zone"*) eval "res_$k=REMOVED" ;;
          *) eval "res_$k=FAIL err_$k=\$e" ;;
        esac
      fi ;;
  esac
  eval "r=\$res_$k"
  case $r in
    REMOVED)
      rm -f "$s.prev" "$f" "$f.jnl" "$f.jbk" "$f.signed" "$f.signed.jnl" \
          "$kp"*.key "$kp"*.private "$kp"*.state ;;
  esac
  eval "e=\$err_$k"
  printf '@@zone %s %s\n%s\n@@end\n' "$k" "$r" "$e"
done
[ ! -s "$out/rm" ] || xargs rm -f <"$out/rm"
