#!/usr/bin/env bash
# The entrypoint of the postgres images hack/engine-images.sh builds: the official postgres
# image's documented contract, for an image that runs as uid 999 from the start (no gosu, no
# chown: the volume is the server's through fsGroup).
#
# A first start (no $PGDATA/PG_VERSION) runs initdb as $POSTGRES_USER, allows password logins
# from any address (`host all all all scram-sha-256`, or $POSTGRES_HOST_AUTH_METHOD), creates
# $POSTGRES_DB and runs /docker-entrypoint-initdb.d/* against a temporary server that listens
# on its Unix socket only. Then the server replaces this script (exec): it is PID 1 and a
# SIGTERM or SIGINT (the image's stop signal) shuts it down cleanly. As in the official image,
# connections from inside the container (the socket, 127.0.0.1) are trusted.
#
#   POSTGRES_USER (default postgres), POSTGRES_PASSWORD (required unless
#   POSTGRES_HOST_AUTH_METHOD=trust), POSTGRES_DB (default $POSTGRES_USER),
#   POSTGRES_INITDB_ARGS, POSTGRES_HOST_AUTH_METHOD, PGDATA; each POSTGRES_* may instead be
#   read from a file named by POSTGRES_*_FILE.
#
# initdb.d: *.sh is executed when executable and sourced otherwise; *.sql, *.sql.gz, *.sql.xz
# run with psql in $POSTGRES_DB; anything else is ignored.
#
# Unlike the official image, a first start that failed half-way (an init script failed) is not
# taken for a database on the next start: the server refuses to start until the volume is
# emptied, rather than serve a database that lacks what initdb.d (a restore) should have put.
set -Eeuo pipefail
shopt -s nullglob

# Messages only: nothing secret is ever passed to log.
log() { printf '%s [entrypoint] %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Sets $1 from $1 or from the file named by ${1}_FILE (not both), else to the default $2.
from_env_or_file() {
  local var=$1 file_var=${1}_FILE value=${2:-}
  [ -z "${!var:-}" ] || [ -z "${!file_var:-}" ] || die "both $var and $file_var are set: set one"
  if [ -n "${!var:-}" ]; then value=${!var}; elif [ -n "${!file_var:-}" ]; then value=$(<"${!file_var}"); fi
  export "$var=$value"
  unset "$file_var"
}

# Flags alone mean the server: `docker run IMAGE -c shared_buffers=256MB`.
if [ "${1:-}" = "" ] || [ "${1:0:1}" = - ]; then set -- postgres "$@"; fi
# Anything else (psql, pg_dump, a shell) runs as given; so does a server asked only for help.
for arg in "$@"; do
  case $arg in -'?' | --help | --describe-config | -V | --version) exec "$@" ;; esac
done
[ "$1" = postgres ] || exec "$@"
[ "$(id -u)" != 0 ] || die "this image runs as uid 999 (postgres), not as root: run it with --user 999"

from_env_or_file POSTGRES_USER postgres
from_env_or_file POSTGRES_PASSWORD
from_env_or_file POSTGRES_DB "$POSTGRES_USER"
from_env_or_file POSTGRES_INITDB_ARGS
: "${POSTGRES_HOST_AUTH_METHOD:=scram-sha-256}"
: "${PGDATA:?PGDATA must name the data directory}"
marker=$PGDATA/.initialising

mkdir -p "$PGDATA" /var/run/postgresql
# initdb and the server want the data directory private (0700); it may not be ours to change.
chmod 0700 "$PGDATA" 2>/dev/null || true

# psql as the superuser over the socket (trusted), stopping at the first error.
sql() { psql -v ON_ERROR_STOP=1 --username="$POSTGRES_USER" --no-password --no-psqlrc "$@"; }

if [ -e "$marker" ]; then
  die "the first start's initialisation of $PGDATA did not finish (its log says why); empty the volume to initialise it again"
elif [ -s "$PGDATA/PG_VERSION" ]; then
  log "$PGDATA holds a database: skipping initialisation"
else
  if [ -z "$POSTGRES_PASSWORD" ] && [ "$POSTGRES_HOST_AUTH_METHOD" != trust ]; then
    die "POSTGRES_PASSWORD is not set: set it (or POSTGRES_PASSWORD_FILE), or POSTGRES_HOST_AUTH_METHOD=trust to allow logins without one"
  fi
  log "initialising $PGDATA for user $POSTGRES_USER"
  initdb_args=()
  eval "initdb_args=($POSTGRES_INITDB_ARGS)" # word-split and unquoted as a shell would
  # The password goes through a pipe, never through the command line (visible in ps).
  if [ -n "$POSTGRES_PASSWORD" ]; then
    initdb --username="$POSTGRES_USER" --pwfile=<(printf '%s\n' "$POSTGRES_PASSWORD") "${initdb_args[@]}"
  else
    initdb --username="$POSTGRES_USER" "${initdb_args[@]}"
  fi
  : >"$marker"
  printf '\nhost all all all %s\n' "$POSTGRES_HOST_AUTH_METHOD" >>"$PGDATA/pg_hba.conf"

  # The temporary server: the socket only, so no client sees a half-initialised database; with
  # the server's arguments (shared_preload_libraries, ...), quoted for the shell pg_ctl uses.
  options=
  [ $# = 1 ] || options=$(printf '%q ' "${@:2}")
  pg_ctl --pgdata="$PGDATA" --wait --options="$options-c listen_addresses='' -p ${PGPORT:-5432}" start
  # The init scripts may use psql, pg_restore ... without further ado, as in the official image.
  export PGPASSWORD=${PGPASSWORD:-$POSTGRES_PASSWORD}
  if [ "$POSTGRES_DB" != postgres ]; then
    sql --dbname=postgres --set=db="$POSTGRES_DB" <<<'CREATE DATABASE :"db";'
  fi
  # shellcheck disable=SC1090 # the scripts are the user's
  for file in /docker-entrypoint-initdb.d/*; do
    case $file in
      *.sh) if [ -x "$file" ]; then log "running $file"; "$file"; else log "sourcing $file"; . "$file"; fi ;;
      *.sql) log "running $file"; sql --dbname="$POSTGRES_DB" --file="$file" ;;
      *.sql.gz) log "running $file"; gzip -dc "$file" | sql --dbname="$POSTGRES_DB" ;;
      *.sql.xz) log "running $file"; xz -dc "$file" | sql --dbname="$POSTGRES_DB" ;;
      *) log "ignoring $file" ;;
    esac
  done
  unset PGPASSWORD
  pg_ctl --pgdata="$PGDATA" --wait --mode=fast stop
  rm -f "$marker"
  log "initialisation complete"
fi

exec "$@"
