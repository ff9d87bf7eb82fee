#!/usr/bin/env bash
# Backup and restore times (the recovery time objective's two parts) of postgres Databases of a
# given size, on a real node: for each size, a Database is filled with that much data, a
# DatabaseBackup is timed from its creation to Completed, and a new Database restored from it
# from its creation to Ready (beside it, for scale, how long the empty Database took from its
# creation to Ready: a restore's time includes such a first start); the copy's rows are
# counted and summed to show it holds the data. The same again with the dump in an
# S3-compatible bucket (hack/object-store.sh: SeaweedFS on this machine): the backup from its
# creation to Completed, with its dump's and its upload's own times (the Job pod's two
# containers), the compressed size, and the restore from the bucket from its creation to Ready,
# with its fetch's own time. The claim backup is verified (spec.verify): from its Completed to
# its verification's result, with the restore's own time in the throwaway (status.verified.
# restoreSeconds) and the rows counted there against those the dump counted.
# docs/reliability.md quotes the tables this prints.
#
# usage: hack/bench/rto.sh
#
#   SIZES="100 1000"   sizes in MB of the table written (pg_total_relation_size, about)
#   PLANE=rto          the control plane this script starts (NODES=real) and stops; with
#                      KUBECONFIG set, that cluster is used as it is (it needs a node that runs
#                      the images of hack/engine-images.sh, and the CRDs)
#   NAMESPACE=rto      the namespace of the Databases (made, and deleted at the end)
#   TIMEOUT=3600       seconds any one step may take
#   IMAGE              the operator's image, which uploads and fetches (default: hack/image.sh
#                      builds it and imports it into the plane's real node)
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
if [ -z "${IMAGE:-}" ]; then
  log "building the operator's image (it uploads dumps to the bucket)"
  IMAGE=$(hack/image.sh | tail -n 1)
fi
log "starting an object store"
export STORE=rto
hack/object-store.sh up
on_exit "STORE=rto hack/object-store.sh down >/dev/null 2>&1"
eval "$(hack/object-store.sh env)"
target/debug/database-operator crd | kubectl apply --server-side -f - >/dev/null
kubectl wait --for=condition=Established crd/databases.example.com crd/databasebackups.example.com --timeout=60s >/dev/null
kubectl create namespace "$NAMESPACE" >/dev/null
on_exit "kubectl delete namespace $NAMESPACE --wait=false >/dev/null 2>&1"
kubectl create secret generic bucket-keys -n "$NAMESPACE" --from-file=access-key-id="$OBJECT_STORE_DIR/access-key-id" \
  --from-file=secret-access-key="$OBJECT_STORE_DIR/secret-access-key" >/dev/null
target/debug/database-operator --kubeconfig "$KUBECONFIG" --metrics-bind-address 0 --health-probe-bind-address 0 \
  --backup-image "$IMAGE" \
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

bucket="{endpoint: '$OBJECT_STORE_ENDPOINT', name: $OBJECT_STORE_BUCKET, credentialsSecret: bucket-keys}"

database() { # NAME [BACKUP [BUCKET]]
  local restore=
  [ -z "${2:-}" ] || restore="restoreFrom: {backup: $2${3:+, bucket: $3}}"
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

# The seconds container NAME of POD ran (init containers included).
ran() { # POD CONTAINER
  kubectl get -n "$NAMESPACE" "$1" -o json | python3 -c "
import datetime, json, sys
pod = json.load(sys.stdin)['status']
for c in pod.get('initContainerStatuses', []) + pod.get('containerStatuses', []):
    if c['name'] == '$2':
        t = c['state']['terminated']
        at = lambda s: datetime.datetime.fromisoformat(s.replace('Z', '+00:00'))
        print(f\"{(at(t['finishedAt']) - at(t['startedAt'])).total_seconds():.0f}\")"
}

printf '| data MB | rows | empty Database: created to Ready s | written s | dump MB | backup s (created to Completed) | restore s (created to Ready) | rows and sum read back |\n|--:|--:|--:|--:|--:|--:|--:|---|\n' >target/rto.md
printf '| data MB | rows the dump counted | verification s (Completed to Passed) | its restore s (throwaway created to Ready) | rows counted in the throwaway |\n|--:|--:|--:|--:|--:|\n' >target/rto-verify.md
printf '| data MB | dump s | upload s | backup s (created to Completed) | dump.gz MB | restore s (created to Ready) | fetch s | rows and sum read back |\n|--:|--:|--:|--:|--:|--:|--:|---|\n' >target/rto-bucket.md
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
spec: {database: $name, verify: true}
EOF
  backup_s=$(wait_for "$name-1 to complete" '{.status.phase}' Completed "databasebackup/$name-1")
  verify_s=$(wait_for "$name-1 to be verified" '{.status.verified.result}' Passed "databasebackup/$name-1")
  verified=$(kubectl get -n "$NAMESPACE" "databasebackup/$name-1" \
    -o 'jsonpath={.status.verified.restoreSeconds} {.status.count} {.status.verified.count}')
  read -r verify_restore_s dump_count verify_count <<<"$verified"
  log "$name: verified ${verify_s}s after it completed (restore ${verify_restore_s}s; $verify_count rows of $dump_count)"
  printf '| %s | %s | %s | %s | %s |\n' "$size" "$dump_count" "$verify_s" "$verify_restore_s" "$verify_count" >>target/rto-verify.md
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
  kubectl delete -n "$NAMESPACE" "database/$name-copy" "databasebackup/$name-1" --wait=false >/dev/null

  log "$name: a backup to the bucket"
  kubectl apply -n "$NAMESPACE" --server-side -f - >/dev/null <<EOF
apiVersion: example.com/v1
kind: DatabaseBackup
metadata: {name: $name-s3}
spec: {database: $name, bucket: $bucket}
EOF
  s3_s=$(wait_for "$name-s3 to complete" '{.status.phase}' Completed "databasebackup/$name-s3")
  pod=$(kubectl get pod -n "$NAMESPACE" -l "batch.kubernetes.io/job-name=$name-s3" -o name | head -n 1)
  dump_s=$(ran "$pod" dump)
  upload_s=$(ran "$pod" upload)
  gz_mb=$(kubectl get -n "$NAMESPACE" "databasebackup/$name-s3" -o 'jsonpath={.status.size}' | python3 -c "import sys; print(round(int(sys.stdin.read()) / 1048576))")
  log "$name: in the bucket in ${s3_s}s (dump ${dump_s}s, upload ${upload_s}s), $gz_mb MB compressed"
  kubectl delete -n "$NAMESPACE" "database/$name" --wait=true >/dev/null
  start=$(date +%s.%N)
  database "$name-s3copy" "$name-s3" "$bucket"
  # The fetch's own time, from the first pod (the restored Database's next pod has no fetch).
  until fetch_s=$(ran "$(kubectl get pod -n "$NAMESPACE" -l "app=$name-s3copy" -o name | head -n 1)" fetch 2>/dev/null) &&
    [ -n "$fetch_s" ]; do
    sleep 0.5
  done
  wait_for "$name-s3copy to be Ready" '{.status.phase}' Ready "database/$name-s3copy" >/dev/null
  s3_restore_s=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
  got=$(sql "$name-s3copy" "select count(*) || ' ' || sum(hashtext(payload)::bigint) from items")
  [ "$got" = "$expected" ] || die "$name-s3copy holds '$got', not '$expected'"
  log "$name: restored from the bucket in ${s3_restore_s}s (fetch ${fetch_s}s); the same count and sum"
  printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$size" "$dump_s" "$upload_s" "$s3_s" "$gz_mb" "$s3_restore_s" \
    "$fetch_s" "the same" >>target/rto-bucket.md
  kubectl delete -n "$NAMESPACE" "database/$name-s3copy" "databasebackup/$name-s3" --wait=false >/dev/null
done
cat target/rto.md
echo
cat target/rto-bucket.md
echo
cat target/rto-verify.md
