#!/usr/bin/env bash
# Backup and restore times (the recovery time objective's two parts) of postgres Databases of a
# given size, on a real node: for each size, a Database is filled with that much data, a
# DatabaseBackup is timed from its creation to Completed, and a new Database restored from it
# from its creation to Ready (beside it, for scale, how long the empty Database took from its
# creation to Ready: a restore's time includes such a first start); the copy's rows are
# counted and summed to show it holds the data.
# docs/reliability.md quotes the table this prints.
#
# usage: hack/bench/rto.sh
#
#   SIZES="100 1000"   sizes in MB of the table written (pg_total_relation_size, about)
#   PLANE=rto          the control plane this script starts (NODES=real) and stops; with
#                      KUBECONFIG set, that cluster is used as it is (it needs a node that runs
#                      the images of hack/engine-images.sh, and the CRDs)
#   NAMESPACE=rto      the namespace of the Databases (made, and deleted at the end)
#   TIMEOUT=3600       seconds any one step may take
#
# The data: rows of an id and 256 characters of random hex digits (about 330 bytes a row in
# the table), so that the dump cannot compress them away. The operator runs as a process (the
# debug build) with the plane's kubeconfig.
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh" rto

SIZES=${SIZES:-100 1000}
NAMESPACE=${NAMESPACE:-rto}
TIMEOUT=${TIMEOUT:-3600}

if [ -z "${KUBECONFIG:-}" ]; then
  export PLANE=${PLANE:-rto} NODES=real
  log "starting control plane $PLANE with a real node"
  hack/control-plane.sh up >/dev/null
  stop_plane_on_exit
  eval "$(hack/control-plane.sh env)"
  log "importing the engines' images into the real node"
  hack/engine-images.sh import "$CONTAINERD_ADDRESS" >/dev/null
fi
log "building the operator"
cargo build -q --bin database-operator
target/debug/database-operator crd | kubectl apply --server-side -f - >/dev/null
kubectl wait --for=condition=Established crd/databases.example.com crd/databasebackups.example.com --timeout=60s >/dev/null
kubectl create namespace "$NAMESPACE" >/dev/null
on_exit "kubectl delete namespace $NAMESPACE --wait=false >/dev/null 2>&1"
target/debug/database-operator --kubeconfig "$KUBECONFIG" --metrics-bind-address 0 --health-probe-bind-address 0 \
  >"target/rto-operator.log" 2>&1 &
operator=$!
on_exit "kill $operator 2>/dev/null"

# wait_for WHAT JSONPATH VALUE OBJECT: until OBJECT's JSONPATH is VALUE; prints the seconds.
wait_for() {
  local what=$1 path=$2 value=$3 object=$4 start
  start=$(date +%s.%N)
  until [ "$(kubectl get -n "$NAMESPACE" "$object" -o "jsonpath=$path" 2>/dev/null)" = "$value" ]; do
    python3 -c "import sys,time; sys.exit(time.time() - $start > $TIMEOUT)" || die "timed out waiting for $what"
    sleep 0.5
  done
  python3 -c "import time; print(f'{time.time() - $start:.1f}')"
}

database() { # NAME [BACKUP]
  local restore=
  [ -z "${2:-}" ] || restore="restoreFrom: {backup: $2}"
  kubectl apply -n "$NAMESPACE" --server-side -f - >/dev/null <<EOF
apiVersion: example.com/v1
kind: Database
metadata: {name: $1}
spec:
  size: small
  image: postgres:17
  engine: postgres
  storage: {size: 20Gi}
  $restore
EOF
}

sql() { # DATABASE SQL
  kubectl exec -n "$NAMESPACE" "deploy/$1" -c database -- psql -U app -d app -Atq -v ON_ERROR_STOP=1 -c "$2"
}

printf '| data MB | rows | empty Database: created to Ready s | written s | dump MB | backup s (created to Completed) | restore s (created to Ready) | rows and sum read back |\n|--:|--:|--:|--:|--:|--:|--:|---|\n' >target/rto.md
for mb in $SIZES; do
  name=pg-$mb
  rows=$((mb * 1024 * 1024 / 330))
  log "$name: a Database with $rows rows (about $mb MB)"
  database "$name"
  first_s=$(wait_for "$name to be Ready" '{.status.phase}' Ready "database/$name")
  start=$(date +%s.%N)
  sql "$name" "create table items as select i as id, md5(random()::text) || md5(random()::text) || md5(random()::text) || md5(random()::text) || md5(random()::text) || md5(random()::text) || md5(random()::text) || md5(random()::text) as payload from generate_series(1, $rows) i"
  written=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
  size=$(sql "$name" "select pg_total_relation_size('items') / 1048576")
  expected=$(sql "$name" "select count(*) || ' ' || sum(hashtext(payload)::bigint) from items")
  log "$name: $size MB written in ${written}s; count and sum: $expected"

  kubectl apply -n "$NAMESPACE" --server-side -f - >/dev/null <<EOF
apiVersion: example.com/v1
kind: DatabaseBackup
metadata: {name: $name-1}
spec: {database: $name}
EOF
  backup_s=$(wait_for "$name-1 to complete" '{.status.phase}' Completed "databasebackup/$name-1")
  claim=$(kubectl get -n "$NAMESPACE" "databasebackup/$name-1" -o 'jsonpath={.status.claimName}')
  volume=$(kubectl get -n "$NAMESPACE" "pvc/$claim" -o 'jsonpath={.spec.volumeName}')
  path=$(kubectl get "pv/$volume" -o 'jsonpath={.spec.local.path}{.spec.hostPath.path}')
  dump_mb=$(du -sm "$path" | cut -f1)
  log "$name: backup Completed in ${backup_s}s, dump $dump_mb MB"

  database "$name-copy" "$name-1"
  restore_s=$(wait_for "$name-copy to be Ready" '{.status.phase}' Ready "database/$name-copy")
  got=$(sql "$name-copy" "select count(*) || ' ' || sum(hashtext(payload)::bigint) from items")
  [ "$got" = "$expected" ] || die "$name-copy holds '$got', not '$expected'"
  log "$name: restored in ${restore_s}s; the same count and sum"
  printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$size" "$rows" "$first_s" "$written" "$dump_mb" "$backup_s" "$restore_s" \
    "the same ($expected)" >>target/rto.md
  kubectl delete -n "$NAMESPACE" "database/$name" "database/$name-copy" "databasebackup/$name-1" --wait=false >/dev/null
done
cat target/rto.md
