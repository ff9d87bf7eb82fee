# syntax=docker/dockerfile:1
#
# The database-operator image: one statically linked binary on an empty base, run as a
# numeric non-root user. hack/image.sh builds the binary (glibc, crt-static) and then this
# recipe, offline, with buildah; the build context is a directory holding only the binary
# (target/image/context), so no base image, registry or toolchain is needed here:
#
#   hack/image.sh                          # buildah; tags localhost/database-operator:VERSION
#   CONTAINER_TOOL=docker hack/image.sh    # the same recipe with docker
#
# manifests/kustomization.yaml (images:) and the Helm chart's image.repository name that tag.
FROM scratch

ARG VERSION=unknown
ARG REVISION=unknown
ARG SOURCE=unknown
ARG CREATED=1970-01-01T00:00:00Z
LABEL org.opencontainers.image.title="database-operator" \
      org.opencontainers.image.description="A Kubernetes operator for Database resources (example.com/v1)" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.created="${CREATED}"

COPY database-operator /database-operator

# The uid/gid of manifests/manager/manager.yaml's securityContext; numeric, since an empty
# base has no /etc/passwd, and the "restricted" Pod Security level checks runAsNonRoot by it.
USER 65532:65532

# 8443: metrics (HTTPS), 8081: health probes (/healthz, /livez, /readyz).
EXPOSE 8443 8081

ENTRYPOINT ["/database-operator"]
CMD ["run"]
