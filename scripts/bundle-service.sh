#!/usr/bin/env bash
# Makes one service's production bundle in <outdir>: its compiled dist/, its package.json and its
# production dependencies (workspace packages as their built dist/), runnable with
# `node dist/server.js` on a plain Node 24. Each service's Dockerfile runs this in its build stage;
# `pnpm test:compose` checks what the image then holds. Meant for a clean tree (no dist/ left from
# an earlier build), as the build context is.
#
#   usage: scripts/bundle-service.sh <service> <outdir>     e.g. items-list /bundle
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 <service> <outdir>" >&2
  exit 2
fi
service=$1
outdir=$(realpath -m -- "$2")
cd "$(dirname "$0")/.."
if [ ! -f "services/$service/package.json" ]; then
  echo "no service named \"$service\" under services/" >&2
  exit 2
fi

# The only dependency allowed an install script is the root `node` devDependency, which downloads
# a second Node binary (about 120 MB, fetched by npm outside the lockfile's integrity hashes) to pin
# Node for developers. The bundle is built by the Node 24 that will run it, so that download is
# skipped; nothing else is lost, as pnpm runs no other dependency's scripts.
# --offline: everything comes from pnpm's store, which `pnpm fetch` filled from the lockfile (the
# image's build stage runs it first, with an empty store and cache, as a newcomer's machine has). Nothing is resolved again, so the bundle holds exactly the lockfile's versions.
pnpm install --frozen-lockfile --ignore-scripts --offline
# The service and the workspace packages it depends on, dependencies first.
pnpm --filter "$service..." run build
# Workspace packages are injected (pnpm-workspace.yaml), so deploy reuses the lockfile as it is and
# copies each one's "files" (dist). pnpm 10's legacy deploy resolved their ranges again and needed
# registry metadata that only a warm cache holds.
pnpm --filter "$service" deploy --prod --offline "$outdir"
