# syntax=docker/dockerfile:1
#
# The database-operator image: a static (musl) binary on distroless, running as non-root.
#
#   docker build -t database-operator:latest .
#
# manifests/manager/manager.yaml runs this image as `database-operator:latest`.

# --- build ------------------------------------------------------------------------------------
FROM rust:1-bookworm AS builder

# musl-tools gives musl-gcc, which the cc crate uses to compile ring's C and assembly for the
# musl target. TLS is rustls on ring, so there is no OpenSSL to link.
RUN apt-get update \
 && apt-get install -y --no-install-recommends musl-tools \
 && rm -rf /var/lib/apt/lists/* \
 && rustup target add x86_64-unknown-linux-musl

WORKDIR /src
COPY . .

# The cache mounts keep the registry and the target directory between builds, so a change in
# the sources does not rebuild every dependency. The binary is copied out of the cached target
# directory because a cache mount is not part of the image.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --target x86_64-unknown-linux-musl --bin database-operator \
 && cp target/x86_64-unknown-linux-musl/release/database-operator /database-operator

# --- run --------------------------------------------------------------------------------------
# distroless/static has CA certificates, /etc/passwd with `nonroot` (65532) and no shell.
FROM gcr.io/distroless/static:nonroot

COPY --from=builder /database-operator /database-operator

# The same uid/gid as the Deployment's securityContext (runAsUser 65532, runAsNonRoot).
USER 65532:65532

# 8080: metrics, 8081: health probes (/healthz, /readyz).
EXPOSE 8080 8081

ENTRYPOINT ["/database-operator"]
CMD ["run"]
