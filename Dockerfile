# syntax=docker/dockerfile:1
# Multi-stage build: compile the operator with the Rust toolchain, ship only
# the binary on a distroless base that runs as a non-root user.

ARG RUST_VERSION=1.89

FROM rust:${RUST_VERSION}-bookworm AS builder
WORKDIR /src

# Build the dependency graph first against empty sources so that a source-only
# change reuses the cached dependency layer.
COPY Cargo.toml Cargo.lock ./
RUN mkdir src \
    && echo 'fn main() {}' > src/main.rs \
    && touch src/lib.rs \
    && cargo build --release --locked \
    && rm -rf src

COPY src ./src
# Cargo compares mtimes; make sure the real sources are newer than the stubs.
RUN touch src/lib.rs src/main.rs \
    && cargo build --release --locked --bin bind-operator \
    && install -D -m 0755 target/release/bind-operator /out/bind-operator

# cc: glibc + libgcc, which the binary links against (TLS is rustls, so no
# OpenSSL). The nonroot tag runs as uid/gid 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=builder /out/bind-operator /usr/local/bin/bind-operator
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/bind-operator"]
CMD ["run"]
