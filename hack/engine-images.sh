#!/usr/bin/env bash
# Builds the database engines' container images from Debian packages, for a node that reaches
# no image registry, under their official names so that Database manifests run unchanged there.
#
# usage: hack/engine-images.sh build            build what the cache lacks, then print one line
#                                               per image: ARCHIVE<TAB>NAME...
#        hack/engine-images.sh import ADDRESS   build, then import every image into the
#                                               containerd whose socket is ADDRESS (namespace
#                                               k8s.io, unpacked: the kubelet starts it at once)
#
#   postgres-17  Debian trixie    docker.io/library/postgres:17.<minor>, :17, and :17.<minor>-trixie,
#                                 :17-trixie (the official images name the Debian suite so too)
#   postgres-15  Debian bookworm  docker.io/library/postgres:15.<minor>, :15, :15.<minor>-bookworm,
#                                 :15-bookworm
#   mariadb      Debian trixie    docker.io/library/mariadb:11.8.<patch>, :11.8, :11, and
#                                 localhost/mysql-protocol:11.8.<patch>, :11.8 for the operator's
#                                 mysql engine: a MySQL-protocol image, MariaDB underneath (Debian
#                                 has no Oracle MySQL; its mysql, mysqladmin and mysqldump are
#                                 MariaDB's, and MYSQL_* settings are read as MARIADB_* ones)
#   redis        Debian trixie    docker.io/library/redis:<version>, :<major.minor>, :<major>
#
# Each image runs as uid 999 (the restricted Pod Security level's way) with an entrypoint of its
# own (hack/engine-images/) that honours the official image's contract: POSTGRES_*,
# MARIADB_*/MYSQL_*, /docker-entrypoint-initdb.d, healthcheck.sh, redis-server flags.
#
# How: a root filesystem from the host's Debian mirror (mmdebstrap, variant essential: no apt in
# the image, no recommends), with the server's user (999) created before its packages and no
# docs, man pages or translations; one layer, committed with buildah; the smoke test
# (hack/engine-images/smoke.sh, podman); then an OCI archive that carries every name. Archives
# are cached in $ENGINE_IMAGES_CACHE, named after the image, its Debian package version and a
# hash of this script and the image's own files: a second run builds nothing, a changed
# entrypoint rebuilds its image alone, and an image whose smoke test fails is not cached.
# Beside them: each suite's package lists (fetched again after an hour) and downloaded .debs.
# Built images also stay in podman's store, under the same names. hack/engine-images/
# import-test.sh tries `import` on a throwaway containerd.
#
#   ENGINE_IMAGES        the images to build (default: postgres-17 postgres-15 mariadb redis)
#   ENGINE_IMAGES_CACHE  default ${XDG_CACHE_HOME:-~/.cache}/database-operator/images
#   CONTAINERS_CONF      buildah's and podman's settings (default hack/image/containers.conf)
#
# Runs as root (mmdebstrap and buildah write files of uid 999); installs mmdebstrap, buildah,
# podman and runc (and containerd, for ctr) with apt-get when they are missing.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
here=$root/hack/engine-images
start=$(date +%s)
log() { printf '[engine-images %4ss] %s\n' "$(($(date +%s) - start))" "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage="usage: hack/engine-images.sh build | import ADDRESS"
command=${1:-}
case $command in
  build) [ $# = 1 ] || die "$usage" ;;
  import)
    [ $# = 2 ] || die "$usage"
    [ -S "$2" ] || die "$2 is not a socket: give the containerd's socket (its [grpc] address)" ;;
  *) die "$usage" ;;
esac
[ "$(id -u)" = 0 ] || die "run as root: mmdebstrap and buildah write files owned by uid 999"
cache=${ENGINE_IMAGES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/database-operator/images}
export CONTAINERS_CONF=${CONTAINERS_CONF:-$root/hack/image/containers.conf}
mkdir -p "$cache"
# One run at a time: two would build the same image into the same archive.
exec 9>"$cache/.lock"
flock --nonblock 9 || { log "waiting for another hack/engine-images.sh to finish"; flock 9; }

# The tools, from the distribution's packages when missing.
tools=(mmdebstrap:mmdebstrap buildah:buildah podman:podman runc:runc python3:python3)
[ "$command" = build ] || tools+=(ctr:containerd)
missing=()
for tool in "${tools[@]}"; do command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}"); done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]} (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get install -y -qq "${missing[@]}" || { apt-get update -qq && apt-get install -y -qq "${missing[@]}"; }; } >/dev/null ||
    die "apt-get install ${missing[*]} failed"
fi

# The host's Debian mirror and security mirror, as its apt sources name them.
mirror_labelled() {
  # shellcheck disable=SC2016 # apt's own $(...)
  apt-get indextargets --format '$(LABEL) $(REPO_URI)' 2>/dev/null | awk -v l="$1" '$1 == l { print $2; exit }'
}
mirror=$(mirror_labelled Debian)
mirror=${mirror:-http://deb.debian.org/debian/}
security=$(mirror_labelled Debian-Security)
security=${security:-http://deb.debian.org/debian-security/}
sources() { printf 'deb %s %s main\n' "$mirror" "$1" "$mirror" "$1-updates" "$security" "$1-security"; }

# apt-get or apt-cache against a suite's own package lists in the cache (not the host's).
suite_apt() {
  local dir=$cache/apt/$1 tool=$2
  shift 2
  "$tool" -o Dir::Etc::SourceList="$dir/sources.list" -o Dir::Etc::SourceParts=/dev/null \
    -o Dir::State::Lists="$dir/lists" -o Dir::Cache="$dir/cache" -o Dir::State::status=/dev/null \
    -o Debug::NoLocking=1 -o APT::Sandbox::User=root "$@"
}
# A suite's package lists, fetched again when an hour old: a mirror publishes a few times a day.
refresh() {
  local dir=$cache/apt/$1
  mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
  if [ "$(sources "$1")" = "$(cat "$dir/sources.list" 2>/dev/null)" ] &&
    [ -n "$(find "$dir/lists" -maxdepth 0 -mmin -60)" ]; then
    return
  fi
  sources "$1" >"$dir/sources.list"
  suite_apt "$1" apt-get update -qq >/dev/null || die "apt-get update of $1 from $mirror failed"
  touch "$dir/lists"
}

# What makes an image: sets engine, suite, package (whose version names the image), includes,
# user, home, shell, files (its own, under hack/engine-images/).
define() {
  case $1 in
    postgres-17 | postgres-15)
      engine=postgres major=${1#postgres-} package=postgresql-${1#postgres-}
      suite=$([ "$major" = 17 ] && echo trixie || echo bookworm)
      includes="$package xz-utils" user=postgres home=/var/lib/postgresql shell=/bin/bash
      files="postgres-entrypoint.sh" ;;
    mariadb)
      engine=mariadb suite=trixie package=mariadb-server
      includes="mariadb-server mariadb-client-compat tzdata xz-utils" user=mysql home=/var/lib/mysql
      shell=/bin/false files="mariadb-entrypoint.sh healthcheck.sh" ;;
    redis)
      engine=redis suite=trixie package=redis-server includes=redis-server user=redis
      home=/var/lib/redis shell=/usr/sbin/nologin files="redis-entrypoint.sh" ;;
    *) die "unknown image '$1' in ENGINE_IMAGES: postgres-17, postgres-15, mariadb, redis" ;;
  esac
}

# The upstream version of a Debian version: 1:11.8.9+ds-0+deb13u1 -> 11.8.9.
upstream() { sed -E 's/^[0-9]+://; s/-[^-]*$//; s/[+~].*$//' <<<"$1"; }

# The names of an image of upstream version $1.
names_of() {
  local v=$1 minor major=${1%%.*}
  minor=$(cut -d. -f1-2 <<<"$v")
  case $engine in
    postgres) echo "docker.io/library/postgres:$v docker.io/library/postgres:$major" \
      "docker.io/library/postgres:$v-$suite docker.io/library/postgres:$major-$suite" ;;
    mariadb) echo "docker.io/library/mariadb:$v docker.io/library/mariadb:$minor docker.io/library/mariadb:$major" \
      "localhost/mysql-protocol:$v localhost/mysql-protocol:$minor" ;;
    redis) echo "docker.io/library/redis:$v docker.io/library/redis:$minor docker.io/library/redis:$major" ;;
  esac
}

# The engine's own settings of a root filesystem ($1), after its packages.
customise() {
  local fs=$1
  case $engine in
    postgres)
      # No JIT: LLVM (and z3, which only LLVM uses) is 150 MB, more than the server itself; the
      # server plans without JIT when its provider is missing. dpkg forgets them despite the
      # dependency: the image has no apt to complain.
      # shellcheck disable=SC2046,SC2016 # package names; dpkg-query's own ${...}
      chroot "$fs" dpkg --purge --force-depends $(chroot "$fs" dpkg-query -W -f '${db:Status-Status} ${Package}\n' \
        'libllvm*' 'libz3-*' | awk '$1 == "installed" { print $2 }') >/dev/null 2>&1 || die "dpkg --purge libllvm failed"
      rm -rf "$fs/usr/lib/postgresql/$major/lib/llvmjit"* "$fs/usr/lib/postgresql/$major/lib/bitcode"
      # The package's own cluster (main) and snake-oil key are not this image's.
      rm -rf "$fs/etc/postgresql/$major" "$fs/var/lib/postgresql/$major" "$fs/etc/ssl/private/ssl-cert-snakeoil.key" \
        "$fs/etc/ssl/certs/ssl-cert-snakeoil.pem"
      # Listen on every address, as the official image's initdb configures it.
      sed -ri "s/^#?listen_addresses\s*=\s*'[^']*'/listen_addresses = '*'/" "$fs/usr/share/postgresql/$major/postgresql.conf.sample"
      grep -q "^listen_addresses = '\*'" "$fs/usr/share/postgresql/$major/postgresql.conf.sample" || die "postgresql.conf.sample: listen_addresses not set"
      install -d -o 999 -g 999 -m 3777 "$fs/run/postgresql"
      install -d -o 999 -g 999 -m 1777 "$fs/var/lib/postgresql/data" ;;
    mariadb)
      # The system tables the package's postinst installed are not this image's: the entrypoint
      # installs them into the volume at the first start.
      rm -rf "$fs/var/lib/mysql"
      install -d -o 999 -g 999 -m 0755 "$fs/var/lib/mysql"
      install -d -o 999 -g 999 -m 1777 "$fs/run/mysqld"
      # Sorted after Debian's 50-server.cnf (bind-address = 127.0.0.1), so it wins.
      printf '%s\n' '# hack/engine-images.sh: a server in a container listens on every address;' \
        '# no DNS lookups of clients (a pod address has no useful name).' \
        '[mariadbd]' 'bind-address = *' 'skip-name-resolve' 'host-cache-size = 0' \
        >"$fs/etc/mysql/mariadb.conf.d/90-container.cnf"
      install -m 0755 "$here/healthcheck.sh" "$fs/usr/local/bin/healthcheck.sh" ;;
    redis)
      install -d -o 999 -g 999 -m 0755 "$fs/data" ;;
  esac
  install -m 0755 "$here/$engine-entrypoint.sh" "$fs/usr/local/bin/docker-entrypoint.sh"
  # What a container neither needs nor should share: device nodes (the runtime makes its own),
  # package manager logs and caches.
  rm -rf "${fs:?}"/dev/* "$fs"/var/log/apt "$fs"/var/log/dpkg.log "$fs"/var/cache/apt/* "$fs"/var/cache/debconf/*-old \
    "$fs"/var/cache/ldconfig/aux-cache
}

# The image's configuration (buildah config arguments).
image_config() {
  local path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  case $engine in
    postgres)
      printf '%s\n' --cmd '["postgres"]' --port 5432/tcp --volume /var/lib/postgresql/data \
        --env "PATH=/usr/lib/postgresql/$major/bin:$path" --env PGDATA=/var/lib/postgresql/data \
        --env LANG=C.UTF-8 --env "PG_MAJOR=$major" --env "PG_VERSION=$version" --stop-signal SIGINT ;;
    mariadb)
      printf '%s\n' --cmd '["mariadbd"]' --port 3306/tcp --volume /var/lib/mysql --env "PATH=$path" \
        --env LANG=C.UTF-8 --env "MARIADB_VERSION=$debian_version" ;;
    redis)
      printf '%s\n' --cmd '["redis-server"]' --port 6379/tcp --volume /data --workingdir /data \
        --env "PATH=$path" --env "REDIS_VERSION=$version" ;;
  esac
}

# Builds image $1 into archive $2 (names ${names[@]}), after its smoke test.
build() {
  local id=$1 archive=$2 rootfs mirrors=() built t0=$SECONDS
  work=$(mktemp -d "${TMPDIR:-/tmp}/engine-images.XXXXXX")
  rootfs=$work/rootfs
  mapfile -t mirrors < <(sources "$suite")
  log "building $id $version ($suite: $package $debian_version): root filesystem"
  # The user first, so the packages' files and directories are 999's; adduser in their
  # maintainer scripts then finds it.
  # Downloaded packages are kept (per suite) for the next build: sync-in, sync-out, and
  # essential/unlink skipped so that the essential ones stay in apt's archives to be synced out.
  mkdir -p "$cache/debs/$suite"
  # shellcheck disable=SC2016 # $1 of the hooks is mmdebstrap's (the root filesystem)
  mmdebstrap --quiet --variant=essential --include="${includes// /,}" --skip=essential/unlink \
    --setup-hook='mkdir -p "$1/var/cache/apt/archives"' \
    --setup-hook="sync-in '$cache/debs/$suite' /var/cache/apt/archives/" \
    --customize-hook="sync-out /var/cache/apt/archives '$cache/debs/$suite'" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/i18n/*' \
    --dpkgopt='path-exclude=/usr/share/lintian/*' \
    --essential-hook="echo '$user:x:999:999::$home:$shell' >>\"\$1/etc/passwd\" &&
      echo '$user:x:999:' >>\"\$1/etc/group\" && echo '$user:!*:1::::::' >>\"\$1/etc/shadow\" &&
      echo '$user:!::' >>\"\$1/etc/gshadow\" && install -d -o 999 -g 999 \"\$1$home\"" \
    "$suite" "$rootfs" "${mirrors[@]}" || die "mmdebstrap $suite failed"
  built=$(dpkg-query --admindir="$rootfs/var/lib/dpkg" -W -f '${Version}' "$package")
  [ "$built" = "$debian_version" ] || die "$package $built was installed, not $debian_version: the mirror moved on; run again"
  customise "$rootfs"
  log "root filesystem: $(du -sm "$rootfs" | cut -f1) MiB; committing ${names[0]}"

  container=$(buildah from --quiet scratch)
  cp -a "$rootfs/." "$(buildah mount "$container")/"
  buildah umount "$container" >/dev/null
  # What it is made of: the packages asked for, the C library and OpenSSL, at their versions.
  local description
  # shellcheck disable=SC2016,SC2086 # dpkg-query's own ${...}; a list of packages
  description="$(dpkg-query --admindir="$rootfs/var/lib/dpkg" -W -f '${db:Status-Status} ${Package} ${Version}\n' \
    $includes libc6 'libssl3*' | awk '$1 == "installed" { printf "%s%s %s", n++ ? ", " : "", $2, $3 }')"
  description+=" from Debian $suite ($mirror)"
  [ "$engine" != mariadb ] || description+="; also the image of the operator's mysql engine: a MySQL-protocol image, MariaDB underneath"
  mapfile -t config < <(image_config)
  buildah config "${config[@]}" --user 999:999 --entrypoint '["docker-entrypoint.sh"]' \
    --created-by "hack/engine-images.sh: mmdebstrap --variant=essential $suite ${includes}" \
    --label "org.opencontainers.image.title=$engine" \
    --label "org.opencontainers.image.version=$version" \
    --label "org.opencontainers.image.description=$description" \
    --label "org.opencontainers.image.source=built from Debian $suite packages by hack/engine-images.sh" \
    "$container"
  local previous name
  previous=$(buildah inspect --type image --format '{{.FromImageID}}' "${names[0]}" 2>/dev/null || true)
  buildah commit --quiet --rm "$container" "${names[0]}" >/dev/null
  container=
  for name in "${names[@]:1}"; do buildah tag "${names[0]}" "$name"; done
  # The image these names left behind, if nothing else names it.
  [ -z "$previous" ] || buildah rmi "$previous" >/dev/null 2>&1 || true

  "$here/smoke.sh" "$engine" "${names[0]}" 9>&- || die "the smoke test of ${names[0]} failed: nothing cached"
  for name in "${names[@]}"; do
    if [[ $name == localhost/mysql-protocol:* ]]; then
      "$here/smoke.sh" mysql "$name" 9>&- || die "the smoke test of $name (mysql) failed: nothing cached"
      break
    fi
  done

  # One OCI layout, one manifest entry per name (containerd names an image after its
  # io.containerd.image.name annotation), then a tar with fixed owners and times.
  buildah push --quiet "${names[0]}" "oci:$work/layout:${names[0]}"
  python3 - "$work/layout/index.json" "${names[@]}" <<'EOF'
import json, sys
path, names = sys.argv[1], sys.argv[2:]
index = json.load(open(path))
manifest = dict(index["manifests"][0])
index["manifests"] = [
    dict(manifest, annotations={"io.containerd.image.name": name,
                                "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1]})
    for name in names
]
json.dump(index, open(path, "w"))
EOF
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$work/layout" -cf "$archive.partial" .
  mv "$archive.partial" "$archive"
  rm -rf "$work" && work=
  log "built $id in $((SECONDS - t0))s: $(du -m "$archive" | cut -f1) MiB archive, $(($(podman image inspect --format '{{.Size}}' "${names[0]}") / 1024 / 1024)) MiB image"
}

# A failed build leaves neither its working container nor its files behind.
work='' container=''
cleanup() {
  [ -z "$container" ] || buildah rm "$container" >/dev/null 2>&1 || true
  [ -z "$work" ] || rm -rf "$work"
  rm -f "$cache"/*.partial
}
trap cleanup EXIT

read -ra images <<<"${ENGINE_IMAGES:-postgres-17 postgres-15 mariadb redis}"
# The candidate versions of the images' packages, asked once per suite (apt-cache takes a second).
declare -A packages=() candidates=()
for id in "${images[@]}"; do define "$id" && packages[$suite]+=" $package"; done
for suite in "${!packages[@]}"; do
  refresh "$suite"
  # shellcheck disable=SC2086 # a list of packages
  while read -r name candidate; do candidates[$name]=$candidate; done < <(suite_apt "$suite" apt-cache policy ${packages[$suite]} |
    awk '/^[^ ]/ { sub(":$", "", $1); name = $1 } $1 == "Candidate:" { print name, $2 }')
done

archives=()
for id in "${images[@]}"; do
  define "$id"
  debian_version=${candidates[$package]:-}
  if [ -z "$debian_version" ] || [ "$debian_version" = "(none)" ]; then die "$package is not in Debian $suite at $mirror"; fi
  version=$(upstream "$debian_version")
  read -ra names <<<"$(names_of "$version")"
  # shellcheck disable=SC2086 # a list of file names
  hash=$(cd "$here" && cat "$root/hack/engine-images.sh" $files | sha256sum | cut -c1-12)
  archive=$cache/${id}_${debian_version#*:}_$hash.oci.tar
  if [ -s "$archive" ]; then
    log "$id $version: cached ($archive)"
  else
    build "$id" "$archive"
    # Older archives of this image are stale now.
    find "$cache" -maxdepth 1 -name "${id}_*.oci.tar" ! -path "$archive" -delete
  fi
  archives+=("$archive")
  printf '%s' "$archive" && printf '\t%s' "${names[@]}" && printf '\n'
done

if [ "$command" = import ]; then
  address=$2
  for archive in "${archives[@]}"; do
    t0=$SECONDS
    ctr --address "$address" -n k8s.io images import "$archive" >&2 ||
      die "ctr images import $archive into $address failed"
    log "imported $(basename "$archive") in $((SECONDS - t0))s"
  done
fi
