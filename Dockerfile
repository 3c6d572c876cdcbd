# winfleet's container image: `docker build -t winfleet .` (or podman/buildah).
#
# The builder compiles OpenSSL (git2's vendored-openssl: the openssl-src
# crate, whose build runs OpenSSL's perl Configure and make), libgit2 and
# libssh2 into the binary; pkg-config finds the system's zlib. The runtime
# image therefore needs CA certificates for HTTPS (git2 points the compiled-in
# OpenSSL at /etc/ssl/certs/ca-certificates.crt at start-up, through
# openssl-probe) and the libz and libgcc_s that debian:bookworm-slim already
# has; nothing else (no git, no ssh client; the binary links no libssl).
# jemalloc, the process allocator (src/main.rs), is compiled in as well,
# with the make and cc the rust:1-bookworm image has.
FROM rust:1-bookworm AS builder
RUN apt-get update \
 && apt-get install -y --no-install-recommends pkg-config perl make \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin winfleet \
 && install -m 0755 target/release/winfleet /winfleet

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=builder /winfleet /usr/local/bin/winfleet
# A numeric non-root user, so Kubernetes' runAsNonRoot can verify it
# (OpenShift replaces it with the namespace's UID).
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/winfleet"]
CMD ["run"]
