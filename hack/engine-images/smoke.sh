#!/usr/bin/env bash
# The smoke test of an engine image, as the operator runs it (hack/engine-images.sh runs it
# before it caches an image): uid 999, all capabilities dropped, no privilege escalation, a
# fresh volume that is the server's only through its group (fsGroup 999: root-owned, group 999,
# setgid, group-writable), and the operator's environment, arguments, probe, dump and restore
# commands (copied from src/database/engine/<engine>.rs; keep them in step).
#
# usage: hack/engine-images/smoke.sh postgres|mariadb|mysql|redis IMAGE
#
# It checks, in order: the first start initialises and the probe passes; the initdb.d hook ran
# (a .sql file made a table; redis has no hook); the credentials log in over TCP, on 127.0.0.1
# and on the container's address, where a wrong password is refused; the server stops cleanly
# on the image's stop signal (exit 0) and, started again, skips initialisation and still has
# the data; the backup Job's dump, run from the image against the server, restores into a
# fresh volume through the restore init container's script (redis: a corrected one, see
# below); no log contains a password.
# shellcheck disable=SC2016 # the operator's commands are expanded by the container's shell
set -euo pipefail
engine=${1:-} image=${2:-}
start=$(date +%s)
log() { printf '[smoke %s %4ss] %s\n' "$engine" "$(($(date +%s) - start))" "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }
[ -n "$image" ] || die "usage: hack/engine-images/smoke.sh postgres|mariadb|mysql|redis IMAGE"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export CONTAINERS_CONF=${CONTAINERS_CONF:-$root/hack/image/containers.conf}

work=$(mktemp -d "${TMPDIR:-/tmp}/engine-smoke.XXXXXX")
prefix=engine-smoke-$engine-$$
containers=()
cleanup() {
  local name
  for name in "${containers[@]}"; do podman rm --force --time 0 "$name" >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# A password no log line could contain by chance.
password=smoke-$(head -c 18 /dev/urandom | base64 | tr '+/' '-_')
initdb_sql="CREATE TABLE smoke (n INT); INSERT INTO smoke VALUES (42);"
case $engine in
  postgres)
    data=/var/lib/postgresql/data
    env=(POSTGRES_USER=app POSTGRES_PASSWORD="$password" POSTGRES_DB=app "PGDATA=$data/pgdata")
    client_env=(PGUSER=app PGPASSWORD="$password")
    args=() probe=(pg_isready --host=127.0.0.1 --port=5432)
    dump='pg_dump --host="$DATABASE_HOST" --port=5432 --format=custom --file=/backup/dump.partial app && mv /backup/dump.partial /backup/dump'
    restore="cp /backup/dump /docker-entrypoint-initdb.d/restore.dump && printf '%s\\n' 'pg_restore --username=\"\$POSTGRES_USER\" --dbname=\"\$POSTGRES_DB\" --no-owner /docker-entrypoint-initdb.d/restore.dump' > /docker-entrypoint-initdb.d/restore.sh" ;;
  mariadb | mysql)
    data=/var/lib/mysql
    upper=${engine^^}
    env=("${upper}_USER=app" "${upper}_PASSWORD=$password" "${upper}_DATABASE=app" "${upper}_RANDOM_ROOT_PASSWORD=yes")
    client_env=(DATABASE_USER=app MYSQL_PWD="$password")
    args=()
    if [ "$engine" = mariadb ]; then
      probe=(healthcheck.sh --connect --innodb_initialized) dumper=mariadb-dump
    else
      probe=(mysqladmin ping --host=127.0.0.1 --port=3306 --silent) dumper=mysqldump
    fi
    dump="$dumper"' --host="$DATABASE_HOST" --port=3306 --user="$DATABASE_USER" --single-transaction --no-tablespaces app > /backup/dump.partial && mv /backup/dump.partial /backup/dump'
    restore='cp /backup/dump /docker-entrypoint-initdb.d/restore.sql' ;;
  redis)
    data=/data
    env=(REDIS_PASSWORD="$password")
    client_env=(REDISCLI_AUTH="$password")
    # Kubernetes expands $(REDIS_PASSWORD) in the operator's arguments; podman does not.
    args=(--requirepass "$password" --appendonly yes --dir /data)
    probe=(sh -c 'REDISCLI_AUTH="$REDIS_PASSWORD" redis-cli ping | grep -q PONG')
    dump='redis-cli -h "$DATABASE_HOST" -p 6379 --rdb /backup/dump.partial && mv /backup/dump.partial /backup/dump'
    # Not the operator's script: it copies the dump to /data/dump.rdb, which Redis 7 and later
    # (the official images too) ignore under --appendonly yes when there is no AOF yet: they
    # start empty. An RDB file can be the AOF's base instead, which the server loads.
    restore='[ -e /data/appendonlydir ] || { mkdir /data/appendonlydir &&
      cp /backup/dump /data/appendonlydir/appendonly.aof.1.base.rdb &&
      echo "file appendonly.aof.1.base.rdb seq 1 type b" >/data/appendonlydir/appendonly.aof.manifest; }' ;;
  *) die "unknown engine '$engine': postgres, mariadb, mysql or redis" ;;
esac

# A directory as fsGroup makes a volume: root's, group 999, setgid, group-writable.
volume() {
  local dir
  dir=$(mktemp -d "$work/$1.XXXX")
  chown 0:999 "$dir" && chmod 2775 "$dir"
  echo "$dir"
}
# The restricted pod's way of running the image: podman run NAME [podman options...] [-- ARGS...]
restricted() {
  local name=$prefix-$1
  shift
  containers+=("$name")
  podman --runtime runc run --name "$name" --user 999:999 --cap-drop=ALL --security-opt=no-new-privileges \
    --stop-timeout 30 "$@"
}
run_server() { # NAME VOLUME INITDB: the server, detached
  restricted "$1" --detach -v "$2:$data" -v "$3:/docker-entrypoint-initdb.d" "${env[@]/#/--env=}" "$image" "${args[@]}" >/dev/null
}
address() { podman inspect --format '{{.NetworkSettings.IPAddress}}' "$prefix-$1"; }
ready() { # NAME: the probe passes, within three minutes
  local deadline=$((SECONDS + 180))
  until podman exec "$prefix-$1" "${probe[@]}" >/dev/null 2>&1; do
    if [ "$(podman inspect --format '{{.State.Running}}' "$prefix-$1")" != true ] || [ $SECONDS -gt $deadline ]; then
      podman logs "$prefix-$1" 2>&1 | tail -30 >&2
      die "$1: the probe (${probe[*]}) never passed"
    fi
    sleep 1
  done
}
# NAME HOST QUERY [PASSWORD]: the engine's client (mysql for mysql), over TCP, as the
# application logs in.
query() {
  local name=$prefix-$1 host=$2 query=$3 secret=${4:-$password}
  # shellcheck disable=SC2086 # redis: a command and its arguments
  case $engine in
    postgres) podman exec --env PGPASSWORD="$secret" "$name" psql --host="$host" --username=app --dbname=app \
      --no-psqlrc --tuples-only --no-align --command="$query" ;;
    mariadb | mysql) podman exec --env MYSQL_PWD="$secret" "$name" "$engine" --host="$host" --port=3306 --user=app \
      --skip-ssl-verify-server-cert --batch --skip-column-names app --execute="$query" ;;
    redis) podman exec --env REDISCLI_AUTH="$secret" "$name" redis-cli --no-auth-warning -h "$host" $query ;;
  esac
}
expect() { # WHAT WANT GOT
  [ "$3" = "$2" ] || die "$1: wanted '$2', got '$3'"
  log "ok: $1"
}

initdb=$(volume initdb)
chmod 0755 "$initdb"
if [ "$engine" != redis ]; then echo "$initdb_sql" >"$initdb/smoke.sql" && chmod 0644 "$initdb/smoke.sql"; fi
volume=$(volume data)

log "first start of $image"
run_server first "$volume" "$initdb"
ready first
log "ok: the probe passes (${probe[*]})"
ip=$(address first)
[ -n "$ip" ] || die "the container has no address"
if [ "$engine" = redis ]; then
  expect "login on 127.0.0.1, a write" OK "$(query first 127.0.0.1 'SET smoke 42')"
  expect "login on $ip, a read" 42 "$(query first "$ip" 'GET smoke')"
  refused=$(query first "$ip" PING wrong-password 2>&1 || true)
  [[ $refused == *WRONGPASS* || $refused == *NOAUTH* ]] || die "a wrong password was not refused: $refused"
  query first 127.0.0.1 'SET later 43' >/dev/null
else
  expect "the initdb.d hook ran; login on 127.0.0.1" 42 "$(query first 127.0.0.1 'SELECT n FROM smoke')"
  expect "login on $ip (password authentication)" 42 "$(query first "$ip" 'SELECT n FROM smoke')"
  query first "$ip" 'SELECT 1' wrong-password >/dev/null 2>&1 && die "a wrong password was accepted on $ip"
  query first 127.0.0.1 'INSERT INTO smoke VALUES (43)' >/dev/null
fi
log "ok: a wrong password is refused"

t0=$SECONDS
podman stop "$prefix-first" >/dev/null
expect "a clean stop on the stop signal ($((SECONDS - t0))s)" 0 "$(podman inspect --format '{{.State.ExitCode}}' "$prefix-first")"
podman start "$prefix-first" >/dev/null
ready first
ip=$(address first) # a new one after the restart
if [ "$engine" = redis ]; then
  expect "the data survives a restart" "42 43" "$(query first 127.0.0.1 'MGET smoke later' | xargs)"
else
  expect "the data survives a restart" "42 43" "$(query first 127.0.0.1 'SELECT n FROM smoke ORDER BY n' | xargs)"
  expect "initialised once, skipped at the restart" "1 1" \
    "$(podman logs "$prefix-first" 2>&1 | grep -c '\[entrypoint\] initialising') $(podman logs "$prefix-first" 2>&1 | grep -c 'skipping initialisation')"
fi

# The backup Job: the image's own dump tool against the server, into a volume of its own.
backup=$(volume backup)
restricted dump --rm -v "$backup:/backup" --env DATABASE_HOST="$ip" "${client_env[@]/#/--env=}" \
  --entrypoint sh "$image" -c "$dump" >/dev/null 2>"$work/dump.err" || { cat "$work/dump.err" >&2; die "the dump failed"; }
[ -s "$backup/dump" ] || die "the dump wrote nothing"
log "ok: the dump ($(du -k "$backup/dump" | cut -f1) KiB)"
# The restore: the init container readies the dump, the server loads it at its first start.
restored=$(volume restored) restore_initdb=$(volume restore-initdb)
restricted restore --rm -v "$backup:/backup:ro" -v "$restored:$data" -v "$restore_initdb:/docker-entrypoint-initdb.d" \
  --entrypoint sh "$image" -c "$restore" || die "the restore script failed"
run_server restored "$restored" "$restore_initdb"
ready restored
if [ "$engine" = redis ]; then
  expect "the restore has the data" "42 43" "$(query restored 127.0.0.1 'MGET smoke later' | xargs)"
else
  expect "the restore has the data" "42 43" "$(query restored 127.0.0.1 'SELECT n FROM smoke ORDER BY n' | xargs)"
fi

# No log holds a secret: neither the password nor, for MariaDB, the healthcheck account's.
secrets=("$password")
if [ -r "$volume/.my-healthcheck.cnf" ]; then secrets+=("$(sed -n 's/^password=//p' "$volume/.my-healthcheck.cnf")"); fi
for name in first restored; do
  logs=$(podman logs "$prefix-$name" 2>&1)
  for secret in "${secrets[@]}"; do
    [[ $logs != *"$secret"* ]] || die "the logs of $name contain a password"
  done
  [[ $logs != *"GENERATED ROOT PASSWORD"* ]] || die "the logs of $name print the generated root password"
done
log "ok: no password in the logs"
log "passed"
