#!/usr/bin/env bash
# An S3-compatible object store for backups, on this machine: SeaweedFS's `weed mini` (master,
# volume server, filer and S3 gateway in one process; built by hack/seaweedfs.sh), with one
# identity whose keys are made at `up`, and a bucket. The tutorial's disaster recovery backs up
# to it, and each bucket test of tests/e2e/buckets.rs starts one of its own.
#
# usage: hack/object-store.sh up|down|env
#
#   STORE     run several side by side (default: default)
#   BUCKET    the bucket `up` creates (default: backups)
#   TLS       1: serve https, with a certificate of a CA of its own (default: 0, plain http)
#   ADDRESS   where it listens (default: the host's end of the real node's link, where the
#             node's pods reach it: NODE_HOST_ADDRESS, which `hack/control-plane.sh env`
#             exports, else that of plane $PLANE; else 127.0.0.1)
#
# `env` prints OBJECT_STORE_ENDPOINT (http(s)://ADDRESS:PORT), OBJECT_STORE_BUCKET and
# OBJECT_STORE_DIR, which holds the keys as files (access-key-id, secret-access-key: `kubectl
# create secret generic --from-file` takes them, and they are printed nowhere) and, with TLS,
# the CA's certificate (ca.crt). State (data, logs, keys) lives in
# ${XDG_CACHE_HOME:-~/.cache}/database-operator/object-stores/$STORE; `down` removes it.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" object-store

store=${STORE:-default}
dir=${XDG_CACHE_HOME:-$HOME/.cache}/database-operator/object-stores/$store
bucket=${BUCKET:-backups}

running() { [ -f "$dir/weed.pid" ] && kill -0 "$(cat "$dir/weed.pid")" 2>/dev/null; }

# A signed S3 request with the store's keys: curl's SigV4 (the body unsigned, as S3 allows).
signed() { # method path [curl args...]
  local method=$1 path=$2
  shift 2
  local ca=()
  [ ! -f "$dir/ca.crt" ] || ca=(--cacert "$dir/ca.crt")
  curl -sS "${ca[@]}" -X "$method" --aws-sigv4 "aws:amz:us-east-1:s3" \
    --user "$(cat "$dir/access-key-id"):$(cat "$dir/secret-access-key")" \
    -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$@" "$(cat "$dir/endpoint")$path"
}

cmd_up() {
  if running; then
    log "object store '$store' is running: $(cat "$dir/endpoint")"
    return
  fi
  local address=${ADDRESS:-${NODE_HOST_ADDRESS:-}}
  if [ -z "$address" ]; then
    address=$( (hack/control-plane.sh env 2>/dev/null || true) | sed -n 's/^export NODE_HOST_ADDRESS=//p')
    address=${address:-127.0.0.1}
  fi
  local weed
  weed=$(hack/seaweedfs.sh | tail -n 1)
  rm -rf "$dir" && mkdir -p "$dir/data" "$dir/logs"
  chmod 700 "$dir"
  # The keys: random, in files readable by their owner alone.
  (umask 077 && head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n' | tr a-f A-F >"$dir/access-key-id")
  (umask 077 && head -c 30 /dev/urandom | base64 | tr -d '/+=\n' >"$dir/secret-access-key")
  (umask 077 && printf '{"identities":[{"name":"backups","credentials":[{"accessKey":"%s","secretKey":"%s"}],"actions":["Admin","Read","Write","List","Tagging"]}]}\n' \
    "$(cat "$dir/access-key-id")" "$(cat "$dir/secret-access-key")" >"$dir/s3.json")
  local ports
  mapfile -t ports < <(hack/free-port.py 10)
  local scheme=http tls=()
  if [ "${TLS:-0}" = 1 ]; then
    scheme=https
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj "/CN=object-store CA" \
      -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$address" \
      -keyout "$dir/s3.key" -out "$dir/s3.csr" 2>/dev/null
    openssl x509 -req -in "$dir/s3.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial -days 30 \
      -extfile <(printf 'subjectAltName=IP:%s\n' "$address") -out "$dir/s3.crt" 2>/dev/null
    tls=(-s3.cert.file="$dir/s3.crt" -s3.key.file="$dir/s3.key")
  fi
  echo "$scheme://$address:${ports[6]}" >"$dir/endpoint"
  log "starting SeaweedFS on $(cat "$dir/endpoint") (logs: $dir/logs)"
  # In its state directory: weed mini writes beside where it runs. Its output goes to its log,
  # never to this script's: a caller waiting for this script's output is not kept waiting.
  (cd "$dir" && exec setsid bash -c 'echo $$ >weed.pid && exec "$@"' weed "$weed" -logdir="$dir/logs" mini \
    -dir="$dir/data" -ip="$address" -ip.bind="$address" \
    -master.telemetry=false -webdav=false -admin.ui=false -admin.port.legacy=0 \
    -s3.port.iceberg=0 -s3.port.lance=0 -s3.autoCreateBucket=false -s3.config="$dir/s3.json" \
    -filer.localSocket="$dir/filer.sock" -s3.localSocket="$dir/s3.sock" \
    -master.port="${ports[0]}" -master.port.grpc="${ports[1]}" -volume.port="${ports[2]}" \
    -volume.port.grpc="${ports[3]}" -filer.port="${ports[4]}" -filer.port.grpc="${ports[5]}" \
    -s3.port="${ports[6]}" -s3.port.grpc="${ports[7]}" -admin.port="${ports[8]}" -admin.port.grpc="${ports[9]}" \
    "${tls[@]}") >>"$dir/logs/weed.out" 2>&1 </dev/null &
  for _ in $(seq 1 50); do [ -s "$dir/weed.pid" ] && break; sleep 0.1; done
  # Ready once the bucket is made: the S3 gateway answers, with the filer behind it. A request
  # that made it while answering an error is answered 409 (BucketAlreadyOwnedByYou) next time.
  local deadline=$(($(date +%s) + 90)) code=
  until code=$(signed PUT "/$bucket" -o /dev/null -w '%{http_code}' 2>/dev/null) && [[ $code == 200 || $code == 409 ]]; do
    running || { tail -n 20 "$dir/logs/weed.out" >&2; die "weed exited (log: $dir/logs/weed.out)"; }
    [ "$(date +%s)" -lt "$deadline" ] || die "timed out after 90s waiting for SeaweedFS's S3 gateway (last answer: $code)"
    sleep 0.5
  done
  log "bucket '$bucket' created; keys in $dir (access-key-id, secret-access-key)"
  echo "$bucket" >"$dir/bucket"
}

cmd_down() {
  if running; then
    local pid
    pid=$(cat "$dir/weed.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -rf "$dir"
  log "object store '$store' stopped"
}

cmd_env() {
  running || die "object store '$store' is not running: start it with hack/object-store.sh up"
  echo "export OBJECT_STORE_ENDPOINT=$(cat "$dir/endpoint")"
  echo "export OBJECT_STORE_BUCKET=$(cat "$dir/bucket")"
  echo "export OBJECT_STORE_DIR=$dir"
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  env) cmd_env ;;
  # For the tests: a signed request (`signed GET /bucket?list-type=2`).
  signed) shift; signed "$@" ;;
  *) echo "usage: $0 up|down|env" >&2; exit 2 ;;
esac
