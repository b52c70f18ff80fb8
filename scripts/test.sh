#!/usr/bin/env bash
# `pnpm test`: every package's tests through turbo, as many test files at once as the machine has
# cores. turbo's default (10 package tasks), each running tap's default share of the cores, put
# 10 or more test files, each with its own redis-server or service processes, on 2 cores: every
# file then took several times its own time, and tap's per-file timeouts and the services' Redis
# deadline failed on time alone (docs/testing.md, "A busy machine").
#
#   usage: pnpm test [turbo run options, such as --filter=items-list]
set -euo pipefail
cd "$(dirname "$0")/.."

# Node's count (what tap itself sizes by), which honours CPU affinity; `nproc` is not on macOS.
cores=$(node -p 'require("node:os").availableParallelism()')
# One package task per core, and in each, tap runs half the cores' worth of files: the two services
# hold most of the suite's files and finish last, so at the end they share the cores between them.
# A TAP_JOBS already set wins.
export TAP_JOBS="${TAP_JOBS:-$(( cores / 2 > 1 ? cores / 2 : 1 ))}"
echo "test: ${cores} cores: up to ${cores} packages at once, ${TAP_JOBS} test file(s) at once in each"
exec turbo run test --concurrency="$cores" "$@"
