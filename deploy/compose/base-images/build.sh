#!/usr/bin/env bash
# Makes sure the Docker engine has the base images the compose stack builds and runs on:
# debian:bookworm-slim, node:24-slim, redis:7 and haproxy:3.2. Each is used as it is when the
# engine has it, pulled when a registry answers, and otherwise built here as a look-alike from
# Debian's packages: a fallback for tests on machines that reach no image registry, never for
# production. A look-alike keeps the official image's paths, users and ids, entrypoint behaviour
# and stop signal; what differs is said in its Dockerfile, and it is labelled as a look-alike.
#
#   usage: build.sh <node-binary>     the Node 24 binary the node:24-slim look-alike gets
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 <node-binary>" >&2
  exit 2
fi
node_binary=$1
here=$(cd "$(dirname "$0")" && pwd)
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

present_or_pulled() {
  docker image inspect "$1" >/dev/null 2>&1 && return 0
  timeout 60 docker pull -q "$1" >/dev/null 2>&1
}

# The official debian:bookworm-slim, which the three others are built on: a minimal rootfs
# made by debootstrap (about 30 s), without apt's caches.
if ! present_or_pulled debian:bookworm-slim; then
  echo "debian:bookworm-slim: building a look-alike with debootstrap" >&2
  rootfs=$(mktemp -d)
  trap 'rm -rf "$rootfs"' EXIT
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >/dev/null
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | docker import \
    --change 'CMD ["bash"]' \
    --change 'LABEL org.opencontainers.image.description="look-alike of debian:bookworm-slim, for tests only"' \
    - debian:bookworm-slim >/dev/null
  rm -rf "$rootfs"
  trap - EXIT
fi

if ! present_or_pulled node:24-slim; then
  echo "node:24-slim: building a look-alike" >&2
  context=$(mktemp -d)
  trap 'rm -rf "$context"' EXIT
  cp "$here/node/Dockerfile" "$here/node/docker-entrypoint.sh" "$context/"
  cp "$node_binary" "$context/node"
  # npm as Node 24's release tarball ships it (npm is a registry package; the binary is not).
  (cd "$context" && npm pack --silent "npm@${NPM_VERSION:-11.19.0}" >/dev/null && mv npm-*.tgz npm.tgz)
  # The registry is reached here through a TLS proxy whose CA only the host's bundle holds.
  cp "${NODE_EXTRA_CA_CERTS:-/etc/ssl/certs/ca-certificates.crt}" "$context/ca-certificates.crt"
  docker build -q -t node:24-slim --build-arg "NODE_VERSION=$("$node_binary" -p 'process.versions.node')" "$context" >/dev/null
  rm -rf "$context"
  trap - EXIT
fi

for image in redis:7 haproxy:3.2; do
  if ! present_or_pulled "$image"; then
    echo "$image: building a look-alike" >&2
    docker build -q -t "$image" "$here/${image%%:*}" >/dev/null
  fi
done
