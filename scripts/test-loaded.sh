#!/usr/bin/env bash
# `pnpm test` on a busy machine: every package's tests, run exactly as `pnpm test` runs them
# (scripts/test.sh), while two busy loops keep two cores to themselves, as a second test suite or
# a build beside it would: on CI's 2 cores, every core is taken. Timing bounds the tests assert
# must hold here too (docs/testing.md, "A busy machine"); CI runs the suite this way only.
#
#   usage: pnpm test:loaded [turbo run options, such as --filter=items-list]
set -euo pipefail
cd "$(dirname "$0")/.."

# Shell loops, not `node -e`: under pnpm, `node` is a shim that starts Node as its child, and
# stopping the shim would leave the loop running.
hogs=()
for _ in 1 2; do
  ( while :; do :; done ) &
  hogs+=("$!")
done
trap 'kill "${hogs[@]}" 2>/dev/null || true' EXIT

started=$SECONDS
status=0
bash scripts/test.sh "$@" || status=$?
echo "test:loaded: $((SECONDS - started)) s beside two busy loops, exit $status"
exit "$status"
