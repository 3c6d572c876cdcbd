# winfleet's container image: `docker build -t winfleet .` (or podman/buildah).
#
# The builder links git2's HTTPS and SSH transports against the system
# OpenSSL (libssl-dev, found through pkg-config); libgit2 and libssh2 are
# compiled in. The runtime image therefore needs libssl.so.3/libcrypto.so.3
# (libssl3), CA certificates for HTTPS, and the libz and libgcc_s that
# debian:bookworm-slim already has; nothing else (no git, no ssh client).
# jemalloc, the process allocator (src/main.rs), is compiled in as well,
# with the make and cc the rust:1-bookworm image has.
FROM rust:1-bookworm AS builder
RUN apt-get update \
 && apt-get install -y --no-install-recommends pkg-config libssl-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin winfleet \
 && install -m 0755 target/release/winfleet /winfleet

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates libssl3 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=builder /winfleet /usr/local/bin/winfleet
# A numeric non-root user, so Kubernetes' runAsNonRoot can verify it
# (OpenShift replaces it with the namespace's UID).
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/winfleet"]
CMD ["run"]
