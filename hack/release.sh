#!/usr/bin/env bash
# Builds a release's artifacts into dist/:
#
#   database-operator-VERSION.oci.tar   the image, as an OCI archive (hack/image.sh)
#   crds.yaml                           the CRDs, alone: `kubectl delete -f install.yaml` leaves
#                                       them, and with them every Database and its data
#   install.yaml                        the rest, to `kubectl apply -f` after crds.yaml: the
#                                       namespace, the RBAC, the admission policy and the
#                                       Deployment, the image pinned by digest
#   database-operator-VERSION.tgz       the Helm chart, its default image pinned by the same digest
#   kubectl-database-VERSION-linux-amd64
#                                       the kubectl plugin (`kubectl database`), to copy onto PATH
#                                       as kubectl-database
#   SHA256SUMS                          the checksums of the five
#
# usage: hack/release.sh VERSION
#
#   IMAGE_REPOSITORY  where the image will be pushed (default localhost/database-operator); the
#                     digest is the archive's manifest digest, which a registry keeps when the
#                     archive is copied as it is:
#                     skopeo copy --preserve-digests oci-archive:dist/database-operator-VERSION.oci.tar \
#                       docker://$IMAGE_REPOSITORY:VERSION
#   DIST              the output directory (default dist)
#
# VERSION must be the crate's version (Cargo.toml) and have a section in CHANGELOG.md.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" release

version=${1:-}
[ -n "$version" ] || die "usage: hack/release.sh VERSION"
crate_version=$(crate_version)
[ "$version" = "$crate_version" ] || die "VERSION $version is not the crate's version ($crate_version): set it in Cargo.toml, Chart.yaml and manifests/kustomization.yaml first"
grep -q "^## \[$version\]" CHANGELOG.md || die "CHANGELOG.md has no '## [$version]' section"
repository=${IMAGE_REPOSITORY:-localhost/database-operator}
dist=${DIST:-dist}
mkdir -p "$dist"
archive=$dist/database-operator-$version.oci.tar
helm=$(hack/helm.sh | tail -n 1)

log "building the image"
IMAGE=$repository:$version IMAGE_ARCHIVE=$archive hack/image.sh >/dev/null
# The digest of the archive's one manifest, checked against its content.
digest=$(python3 - "$archive" <<'PY'
import hashlib, json, sys, tarfile
with tarfile.open(sys.argv[1]) as tar:
    index = json.load(tar.extractfile("index.json"))
    (manifest,) = index["manifests"]
    digest = manifest["digest"]
    blob = tar.extractfile("blobs/sha256/" + digest.removeprefix("sha256:")).read()
    assert "sha256:" + hashlib.sha256(blob).hexdigest() == digest, "the archive's manifest does not match its digest"
print(digest)
PY
)
log "image $repository@$digest"

log "rendering $dist/install.yaml"
mkdir -p target
overlay=$(mktemp -d "$root/target/release-overlay.XXXXXX")
on_exit 'rm -rf "$overlay"'
# manifests/kustomization.yaml names the local tag; the release names the pushed image by digest.
# kustomize follows the overlay's path as the file system does: both paths are resolved (a
# symlinked target/ would otherwise send it to another checkout's manifests).
base_image=$(kubectl kustomize manifests/ | sed -n 's/^ *image: //p' | head -n 1)
cat >"$overlay/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- $(python3 -c 'import os,sys; print(os.path.relpath(*map(os.path.realpath, sys.argv[1:])))' "$root/manifests" "$overlay")
images:
- name: ${base_image%:*}
  newName: $repository
  digest: $digest
# BACKUP_IMAGE is the manager's own image: copied again once the image is pinned (as
# manifests/kustomization.yaml copies it; an env value is not an image to the images field).
replacements:
- source:
    kind: Deployment
    name: database-operator-controller-manager
    fieldPath: spec.template.spec.containers.[name=manager].image
  targets:
  - select:
      kind: Deployment
      name: database-operator-controller-manager
    fieldPaths:
    - spec.template.spec.containers.[name=manager].env.[name=BACKUP_IMAGE].value
EOF
# The render split in two: the CRDs, and everything else.
kubectl kustomize "$overlay" | python3 -c '
import sys
version, crds_path, install_path = sys.argv[1:]
crds, rest = [], []
for document in sys.stdin.read().split("---\n"):
    (crds if "\nkind: CustomResourceDefinition\n" in "\n" + document else rest).append(document)
with open(crds_path, "w") as out:
    out.write(f"# database-operator {version}: the CRDs, applied before install.yaml:\n")
    out.write("#   kubectl apply --server-side -f crds.yaml -f install.yaml\n")
    out.write("# Deleting them deletes every Database and DatabaseBackup, and their data; see the README.\n")
    out.write("---\n".join(crds))
with open(install_path, "w") as out:
    out.write(f"# database-operator {version}, after crds.yaml: kubectl apply --server-side -f crds.yaml -f install.yaml\n")
    out.write("# kubectl delete -f install.yaml removes the operator and keeps the CRDs, the Databases and their data.\n")
    out.write("---\n".join(rest))
' "$version" "$dist/crds.yaml" "$dist/install.yaml"
grep -q "image: $repository@$digest" "$dist/install.yaml" || die "install.yaml does not pin $repository@$digest"
grep -q "value: $repository@$digest" "$dist/install.yaml" || die "install.yaml does not give BACKUP_IMAGE as $repository@$digest"
grep -q "^kind: CustomResourceDefinition" "$dist/install.yaml" && die "install.yaml holds a CRD"

log "packaging the chart"
chart=$overlay/chart/database-operator
mkdir -p "$(dirname "$chart")"
cp -r charts/database-operator "$chart"
python3 - "$chart/values.yaml" "$repository" "$digest" <<'PY'
import re, sys
path, repository, digest = sys.argv[1:]
text = open(path).read()
text, n = re.subn(r'(?m)^(  repository: ).*$', lambda m: m.group(1) + repository, text, count=1)
text, d = re.subn(r'(?m)^(  digest: ).*$', lambda m: m.group(1) + '"' + digest + '"', text, count=1)
assert n == d == 1, "values.yaml has no image.repository or image.digest line"
open(path, "w").write(text)
PY
"$helm" package "$chart" --version "$version" --app-version "$version" --destination "$dist" >/dev/null
# Rendered whole before the search: `grep -q` stops at the first match, and helm, still
# writing, would die of SIGPIPE and fail the pipeline (pipefail) by chance.
rendered=$("$helm" template database-operator "$dist/database-operator-$version.tgz")
grep -q "image: $repository@$digest" <<<"$rendered" ||
  die "the packaged chart does not render $repository@$digest"

log "building the kubectl plugin"
plugin=kubectl-database-$version-linux-amd64
# Static, and built as the image's binary was (its target, flags and revision): the crate and its
# dependencies are compiled once for both, and the plugin runs on any x86_64 Linux.
triple=x86_64-unknown-linux-gnu
CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS="-C target-feature=+crt-static" \
  GIT_REVISION=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown) \
  cargo build --release --locked --bin kubectl-database --target "$triple"
cp "target/$triple/release/kubectl-database" "$dist/$plugin"
[[ $("$dist/$plugin" --version) == "kubectl-database $version "* ]] || die "$dist/$plugin --version: not $version"

(cd "$dist" && sha256sum "database-operator-$version.oci.tar" crds.yaml install.yaml "database-operator-$version.tgz" "$plugin" >SHA256SUMS)
log "done:"
(cd "$dist" && ls -l "database-operator-$version.oci.tar" crds.yaml install.yaml "database-operator-$version.tgz" "$plugin" SHA256SUMS) >&2
