# The common start of the project's scripts: strict mode, the repository's root as the working
# directory, a clock, and the helpers every script needs. A script begins with
#
#   . "$(dirname "${BASH_SOURCE[0]}")/lib.sh" NAME        (hack/bench/: ../lib.sh)
#
# and then has:
#
#   $root              the repository's root (the working directory)
#   log MESSAGE...     "[NAME   12s] MESSAGE" on stderr: the seconds since the script began
#   die MESSAGE...     logs "error: MESSAGE" and exits 1
#   on_exit COMMAND    runs COMMAND (a string, evaluated then) when the script exits, whatever
#                      the reason; commands run last added first, and one failing does not
#                      stop the others
#   stop_plane_on_exit stops the control plane $PLANE at exit (quietly)
#   crate_version      the operator crate's version (Cargo.toml)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
lib_name=${1:-$(basename "$0" .sh)}
lib_start=$(date +%s)

log() { printf '[%s %4ss] %s\n' "$lib_name" "$(($(date +%s) - lib_start))" "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

lib_exit_commands=()
lib_on_exit() {
  local command
  for command in "${lib_exit_commands[@]}"; do eval "$command" || true; done
}
on_exit() {
  lib_exit_commands=("$1" "${lib_exit_commands[@]}")
  trap lib_on_exit EXIT
}

stop_plane_on_exit() {
  on_exit 'log "stopping control plane $PLANE"; hack/control-plane.sh down >/dev/null 2>&1'
}

crate_version() {
  cargo metadata --no-deps --format-version 1 --offline 2>/dev/null |
    python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "database-operator"))'
}

# go_tool NAME BINARY MODULE VERSION PACKAGE LDFLAGS [VAR=VALUE...]: builds PACKAGE of
# MODULE@VERSION in the module's own directory of Go's module cache (its go.mod and go.sum
# decide every dependency) into ~/.cache/database-operator/tools/NAME-VERSION/BINARY, once per
# version and flags, saying every minute that it still builds; VAR=VALUE are set for the build
# only. Prints the binary's path on its last line.
go_tool() {
  local name=$1 binary=$2 module=$3 version=$4 package=$5 ldflags=$6
  shift 6
  local out=${XDG_CACHE_HOME:-$HOME/.cache}/database-operator/tools/$name-$version key dir pid
  key=$(echo "$module@$version CGO_ENABLED=0 -trimpath $ldflags" | sha256sum | cut -c1-12)
  if [ -x "$out/$binary" ] && [ "$(cat "$out/.complete" 2>/dev/null)" = "$key" ]; then
    log "up to date: $out/$binary"
    echo "$out/$binary"
    return 0
  fi
  command -v go >/dev/null || die "building $name needs Go (go.dev/dl), which is not on PATH"
  log "building $name $version into $out"
  log "a cold build downloads and compiles its Go packages (minutes on 2 cores, more while other"
  log "builds share them); later builds reuse Go's build cache ($(go env GOCACHE))"
  dir=$(cd "$(mktemp -d)" && go mod download -json "$module@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  [ -d "$dir" ] || die "go mod download $module@$version gave no directory"
  rm -rf "$out.tmp" && mkdir -p "$out.tmp"
  (cd "$dir" && env "$@" CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "$ldflags" -o "$out.tmp/$binary" "$package") &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 5
    if kill -0 "$pid" 2>/dev/null && [ $((($(date +%s) - lib_start) % 60)) -lt 5 ]; then
      log "  still building"
    fi
  done
  wait "$pid" || die "building $name failed"
  echo "$key" > "$out.tmp/.complete"
  rm -rf "$out" && mv "$out.tmp" "$out"
  log "built in $(($(date +%s) - lib_start))s: $out/$binary"
  echo "$out/$binary"
}
