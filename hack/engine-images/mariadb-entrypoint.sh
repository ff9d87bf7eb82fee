#!/usr/bin/env bash
# The entrypoint of the mariadb image hack/engine-images.sh builds (also the image of the
# operator's mysql engine: a MySQL-protocol image, MariaDB underneath). It honours the official
# mariadb image's documented contract, for an image that runs as uid 999 (mysql) from the start:
# no gosu, no chown, the volume is the server's through fsGroup.
#
# A first start (no mysql/ in the data directory) installs the system tables, then, against a
# temporary server that does not listen on the network, sets the root password, creates the
# database and the user, a `healthcheck` account for healthcheck.sh, and runs
# /docker-entrypoint-initdb.d/*. Then the server replaces this script (exec): it is PID 1 and
# SIGTERM shuts it down cleanly.
#
#   MARIADB_ROOT_PASSWORD, MARIADB_RANDOM_ROOT_PASSWORD or MARIADB_ALLOW_EMPTY_ROOT_PASSWORD
#   (one is required; a non-empty value means yes), MARIADB_ROOT_HOST (default %),
#   MARIADB_DATABASE, MARIADB_USER, MARIADB_PASSWORD, MARIADB_INITDB_SKIP_TZINFO;
#   each also by the mysql image's name (MYSQL_ROOT_PASSWORD, MYSQL_ALLOW_EMPTY_PASSWORD, ...)
#   and from a file named by NAME_FILE. Not implemented: the *_HASH variants, replication,
#   MARIADB_AUTO_UPGRADE, MARIADB_MYSQL_LOCALHOST_USER.
#
# The official image prints a random root password ("GENERATED ROOT PASSWORD: ..."); this one
# does not, nor anything else secret: container logs are read by more people than root should
# be. A random root password is for nobody to know: administer through MARIADB_USER's grants.
#
# initdb.d: *.sh is executed when executable and sourced otherwise; *.sql, *.sql.gz, *.sql.xz
# run as root in MARIADB_DATABASE (when set); anything else is ignored. A first start that
# failed half-way is not taken for a database on the next start (unlike the official image):
# the server refuses to start until the volume is emptied.
set -Eeuo pipefail
shopt -s nullglob

# Messages only: nothing secret is ever passed to log.
log() { printf '%s [entrypoint] %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Sets MARIADB_$1 from MARIADB_$1, its _FILE, then $2 (the mysql image's name) or its _FILE.
setting() {
  local name=MARIADB_$1 var file_var value=
  for var in "$name" "${2:-MYSQL_$1}"; do
    file_var=${var}_FILE
    [ -z "${!var:-}" ] || [ -z "${!file_var:-}" ] || die "both $var and $file_var are set: set one"
    if [ -n "${!var:-}" ]; then value=${!var}; elif [ -n "${!file_var:-}" ]; then value=$(<"${!file_var}"); fi
    [ -z "$value" ] || break
  done
  export "$name=$value"
}

# A string for an SQL literal ('...') and a name for an identifier (`...`).
literal() { local s=${1//\\/\\\\}; printf '%s' "${s//\'/\\\'}"; }
identifier() { printf '%s' "${1//\`/\`\`}"; }
random_password() { head -c 24 /dev/urandom | base64; }

# Flags alone mean the server: `docker run IMAGE --character-set-server=utf8mb4`.
if [ "${1:-}" = "" ] || [ "${1:0:1}" = - ]; then set -- mariadbd "$@"; fi
for arg in "$@"; do
  case $arg in --help | --version | -V | -'?') exec "$@" ;; esac
done
[ "$1" = mariadbd ] || [ "$1" = mysqld ] || exec "$@"
[ "$(id -u)" != 0 ] || die "this image runs as uid 999 (mysql), not as root: run it with --user 999"

setting ROOT_PASSWORD
setting ALLOW_EMPTY_ROOT_PASSWORD MYSQL_ALLOW_EMPTY_PASSWORD
setting RANDOM_ROOT_PASSWORD
setting ROOT_HOST
setting DATABASE
setting USER
setting PASSWORD
setting INITDB_SKIP_TZINFO
: "${MARIADB_ROOT_HOST:=%}"

# Where this server keeps its data and its socket, and its port: as its configuration files
# and arguments say.
read -r datadir socket port < <("$@" --verbose --help 2>/dev/null |
  awk '$1 == "datadir" { d = $2 } $1 == "socket" { s = $2 } $1 == "port" { p = $2 } END { print d, s, p }')
if [ -z "$datadir" ] || [ -z "$socket" ]; then
  die "'$* --verbose --help' fails: check the server's arguments and configuration"
fi
datadir=${datadir%/}
marker=$datadir/.initialising

if [ -e "$marker" ]; then
  die "the first start's initialisation of $datadir did not finish (its log says why); empty the volume to initialise it again"
elif [ -d "$datadir/mysql" ]; then
  log "$datadir holds a database: skipping initialisation"
  exec "$@"
fi

if [ -z "$MARIADB_ROOT_PASSWORD$MARIADB_ALLOW_EMPTY_ROOT_PASSWORD$MARIADB_RANDOM_ROOT_PASSWORD" ]; then
  die "the database is not initialised and no root password is given: set MARIADB_ROOT_PASSWORD, MARIADB_RANDOM_ROOT_PASSWORD=yes or MARIADB_ALLOW_EMPTY_ROOT_PASSWORD=yes"
fi
[ "$MARIADB_USER" != root ] || die "MARIADB_USER=root: the root account is set up by MARIADB_ROOT_PASSWORD, leave MARIADB_USER for another"
[ -z "$MARIADB_USER" ] || [ -n "$MARIADB_PASSWORD" ] || die "MARIADB_USER is set without MARIADB_PASSWORD: set it"
# Not exported: the server's environment (`env` in an exec) does not show a random one.
root_secret=$MARIADB_ROOT_PASSWORD
if [ -n "$MARIADB_RANDOM_ROOT_PASSWORD" ]; then
  root_secret=$(random_password)
  log "root has a random password that is not shown (MARIADB_RANDOM_ROOT_PASSWORD)"
fi

log "initialising $datadir"
mkdir -p "$datadir"
: >"$marker"
mariadb-install-db --datadir="$datadir" --rpm --auth-root-authentication-method=normal --skip-test-db \
  --default-time-zone=SYSTEM --skip-log-bin --expire-logs-days=0 \
  --loose-innodb-buffer-pool-load-at-startup=0 --loose-innodb-buffer-pool-dump-at-shutdown=0 "${@:2}" \
  >/dev/null # its advice (set a root password, run mariadb-secure-installation) is done below

# The temporary server: the socket only, so no client sees a half-initialised database.
"$@" --skip-networking --socket="$socket" --default-time-zone=SYSTEM --skip-log-bin --wsrep-on=OFF \
  --expire-logs-days=0 --skip-slave-start --loose-innodb-buffer-pool-load-at-startup=0 \
  --loose-innodb-buffer-pool-dump-at-shutdown=0 &
server=$!

# mariadb as root over the socket; the password (none until it is set) in the environment,
# never on a command line.
root_password=
sql() { MYSQL_PWD=$root_password mariadb --protocol=socket --socket="$socket" --user=root --batch "$@"; }
for _ in {1..60}; do
  sql --execute='SELECT 1' >/dev/null 2>&1 && break
  kill -0 "$server" 2>/dev/null || die "the temporary server exited (see its log above)"
  sleep 1
done
sql --execute='SELECT 1' >/dev/null || die "the temporary server did not accept connections within a minute"

if [ -z "$MARIADB_INITDB_SKIP_TZINFO" ]; then
  # Some zone files are not zones (leap seconds, posixrules): their warnings say nothing useful.
  mariadb-tzinfo-to-sql --skip-write-binlog /usr/share/zoneinfo 2>/dev/null | sql --database=mysql
fi

healthcheck_password=$(random_password)
{
  # Nobody but root@localhost and the system account: no anonymous accounts and no
  # mysql@localhost, through which the server's own uid would be a superuser on the socket.
  echo "DELETE FROM mysql.global_priv WHERE NOT (User = 'root' AND Host = 'localhost') AND User <> 'mariadb.sys';"
  echo "DELETE FROM mysql.proxies_priv WHERE Host <> 'localhost';"
  echo "FLUSH PRIVILEGES;"
  echo "ALTER USER 'root'@'localhost' IDENTIFIED BY '$(literal "$root_secret")';"
  if [ "$MARIADB_ROOT_HOST" != localhost ]; then
    echo "CREATE USER 'root'@'$(literal "$MARIADB_ROOT_HOST")' IDENTIFIED BY '$(literal "$root_secret")';"
    echo "GRANT ALL ON *.* TO 'root'@'$(literal "$MARIADB_ROOT_HOST")' WITH GRANT OPTION;"
  fi
  # healthcheck.sh's account: it may connect and nothing more.
  for host in 127.0.0.1 ::1 localhost; do
    echo "CREATE USER 'healthcheck'@'$host' IDENTIFIED BY '$healthcheck_password';"
  done
  if [ -n "$MARIADB_DATABASE" ]; then
    echo "CREATE DATABASE IF NOT EXISTS \`$(identifier "$MARIADB_DATABASE")\`;"
  fi
  if [ -n "$MARIADB_USER" ]; then
    echo "CREATE USER '$(literal "$MARIADB_USER")'@'%' IDENTIFIED BY '$(literal "$MARIADB_PASSWORD")';"
    if [ -n "$MARIADB_DATABASE" ]; then
      echo "GRANT ALL ON \`$(identifier "$MARIADB_DATABASE")\`.* TO '$(literal "$MARIADB_USER")'@'%';"
    fi
  fi
} | sql
root_password=$root_secret
(umask 077 && printf '[mariadb-client]\nport=%s\nsocket=%s\nuser=healthcheck\npassword=%s\n' \
  "$port" "$socket" "$healthcheck_password" >"$datadir/.my-healthcheck.cnf")

database=()
[ -z "$MARIADB_DATABASE" ] || database=(--database="$MARIADB_DATABASE")
# shellcheck disable=SC1090 # the scripts are the user's
for file in /docker-entrypoint-initdb.d/*; do
  case $file in
    *.sh) if [ -x "$file" ]; then log "running $file"; "$file"; else log "sourcing $file"; . "$file"; fi ;;
    *.sql) log "running $file"; sql "${database[@]}" <"$file" ;;
    *.sql.gz) log "running $file"; gzip -dc "$file" | sql "${database[@]}" ;;
    *.sql.xz) log "running $file"; xz -dc "$file" | sql "${database[@]}" ;;
    *) log "ignoring $file" ;;
  esac
done

kill -TERM "$server"
wait "$server" || die "the temporary server did not stop cleanly"
rm -f "$marker"
log "initialisation complete"
exec "$@"
