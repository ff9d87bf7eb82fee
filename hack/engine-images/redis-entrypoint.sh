#!/bin/sh
# The entrypoint of the redis image hack/engine-images.sh builds: the official redis image's
# contract, for an image that runs as uid 999 (redis) from the start (no gosu, no chown).
#
# Arguments that start with a flag or a .conf file mean redis-server
# (`docker run IMAGE --requirepass secret --appendonly yes`). Without a configuration file,
# protected mode is off, as the official image compiles it: a container's port is only reached
# when published, and protected mode would refuse every client that is not on loopback when
# no password is set. The server replaces this script (exec), so SIGTERM reaches it.
set -e

case ${1:-} in '' | -* | *.conf) set -- redis-server "$@" ;; esac

if [ "$1" = redis-server ]; then
  shift
  case ${1:-} in
    *.conf) set -- redis-server "$@" ;;
    *) set -- redis-server --protected-mode no "$@" ;;
  esac
  # The data the server writes (RDB, AOF) is its own alone, as in the official image.
  [ "$(umask)" != 0022 ] || umask 0077
fi

exec "$@"
