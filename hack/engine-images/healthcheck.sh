#!/usr/bin/env bash
# healthcheck.sh of the mariadb image hack/engine-images.sh builds: the official image's
# healthcheck contract, for the tests a probe needs.
#
# usage: healthcheck.sh [--su-mysql | --su=USER] [--no-defaults] [--datadir=DIR]
#                       [--defaults-file=FILE | --defaults-extra-file=FILE] TEST...
#   --connect             the server accepts TCP connections on 127.0.0.1 (a refused login
#                         counts: the server answered, as in the official script)
#   --innodb_initialized  InnoDB is ready
#
# The tests log in as the `healthcheck` account of DATADIR/.my-healthcheck.cnf (default
# /var/lib/mysql), which the entrypoint writes at the first start. --no-defaults reads that file
# alone, without the server's configuration files. --su-mysql and --su=USER are accepted and
# ignored: the image already runs as mysql (uid 999). Exits 0 when every test passes.
set -uo pipefail

datadir=/var/lib/mysql no_defaults='' defaults='' tests=()
for arg in "$@"; do
  case $arg in
    --su-mysql | --su=*) ;;
    --no-defaults) no_defaults=1 ;;
    --datadir=*) datadir=${arg#*=} ;;
    --defaults-file=* | --defaults-extra-file=*) defaults=$arg ;;
    --connect | --innodb_initialized) tests+=("${arg#--}") ;;
    *) echo "healthcheck.sh: $arg is not supported (see the usage at the top of $0)" >&2; exit 2 ;;
  esac
done
[ ${#tests[@]} -gt 0 ] || { echo "healthcheck.sh: name a test: --connect, --innodb_initialized" >&2; exit 2; }

account=$datadir/.my-healthcheck.cnf
if [ -z "$defaults" ] && [ -r "$account" ]; then
  if [ -n "$no_defaults" ]; then defaults=--defaults-file=$account; else defaults=--defaults-extra-file=$account; fi
elif [ -z "$defaults" ] && [ -n "$no_defaults" ]; then
  defaults=--no-defaults
fi

client() { mariadb ${defaults:+"$defaults"} --batch --skip-column-names "$@"; }

connect() {
  local out
  out=$(client --protocol=tcp --host=127.0.0.1 --execute='SELECT 1' 2>&1) && return 0
  # Client errors (2xxx: cannot connect, lost the connection) mean no server, unless they carry
  # the server's own refusal (1130 before TLS); any other error (1045: access denied) came from
  # a server that answers.
  [[ $out != *"ERROR 2"[0-9][0-9][0-9]* || $out == *"Received error packet"* ]]
}

innodb_initialized() {
  [ "$(client --execute="SELECT 1 FROM information_schema.ENGINES
    WHERE engine = 'InnoDB' AND support IN ('YES', 'DEFAULT', 'ENABLED')" 2>/dev/null)" = 1 ]
}

for test in "${tests[@]}"; do
  "$test" || { echo "healthcheck.sh: --$test failed" >&2; exit 1; }
done
