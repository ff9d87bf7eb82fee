#!/usr/bin/env bash
# Builds SeaweedFS's `weed` (Apache-2.0), the S3-compatible object store the tests back up to
# (tests/e2e/object_store.rs, hack/object-store.sh), from the Go module proxy (there is no
# download site to fetch a release from) into a cache outside the checkout.
#
#   XDG_CACHE_HOME the cache root (default ~/.cache)
#
# The module is built in its own directory of Go's module cache, so its go.mod (its replace
# line included) and go.sum decide every dependency: nothing is resolved anew. Prints the path of
# the binary on its last line: `WEED=$(hack/seaweedfs.sh | tail -n1)`. A second run is a no-op; a
# new version or new build flags rebuild.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" seaweedfs

# The newest the Go module proxy served on 2026-12-01 (a pseudo-version: the project tags its
# releases without the module path's major version).
module=github.com/seaweedfs/seaweedfs
version=${SEAWEEDFS_VERSION:-v0.0.0-20261109003541-7506e5f91cd6}
go_tool seaweedfs weed "$module" "$version" ./weed "-s -w"
