#!/usr/bin/env bash
# `pnpm test` on a busy machine: every package's tests through turbo, at turbo's own concurrency,
# while a busy loop keeps one core to itself, as a second test suite or a build beside it would.
# Timing bounds the tests assert must hold here too (docs/testing.md, "A busy machine"); CI runs
# the suite this way only.
#
#   usage: pnpm test:loaded [turbo run options, such as --filter=items-list]
set -euo pipefail
cd "$(dirname "$0")/.."

# A shell loop, not `node -e`: under pnpm, `node` is a shim that starts Node as its child, and
# stopping the shim would leave the loop running.
( while :; do :; done ) &
hog=$!
trap 'kill "$hog" 2>/dev/null || true' EXIT

started=$SECONDS
status=0
turbo run test "$@" || status=$?
echo "test:loaded: $((SECONDS - started)) s beside a busy core, exit $status"
exit "$status"
