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
