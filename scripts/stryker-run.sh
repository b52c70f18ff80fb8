#!/usr/bin/env bash
# Runs StrykerJS on the package in the current directory (its stryker.config.json); each
# package's `mutate` script calls this, and the root's `pnpm mutate` runs those through turbo.
#
# The tap runner starts every test file as `node …` found on PATH and then reads a file named
# after that process's pid. Under pnpm, `node` on PATH is the shim of the root `node`
# devDependency: a shell script that starts Node 24 as its child, so the pid never matches and
# every test file fails with "ENOENT … stryker-output-<pid>.json". Putting the Node binary
# itself first on PATH keeps the same Node 24 without the shell in between.
#
#   usage (from a package directory): bash ../../scripts/stryker-run.sh [stryker run options]
set -euo pipefail

node_dir=$(dirname "$(node -p process.execPath)")
export PATH="$node_dir:$PATH"

# `tap` gives each test file the package's `tap.timeout` (seconds) through TAP_TIMEOUT; the tap
# runner starts the files with plain `node`, where a file's root test would otherwise time out
# after tap's default 30 s (service-kit's 408 test waits 30 s on purpose).
TAP_TIMEOUT=$(node -p "require('./package.json').tap?.timeout ?? 30")
export TAP_TIMEOUT

# Stryker ends test processes with SIGKILL (a mutant past its timeout, the end of the run), and a
# killed test never stops the private Redis it started (test-support's startPrivateRedis): one
# run left over a hundred redis-servers behind. When the run ends, those orphans (parent gone,
# working directory one of startPrivateRedis's) are stopped and their directories removed.
stop_orphaned_private_redis() {
  local pid ppid name dir tmp=${TMPDIR:-/tmp}
  while read -r pid ppid name; do
    [ "$name" = redis-server ] && [ "$ppid" = 1 ] || continue
    dir=$(readlink "/proc/$pid/cwd" 2>/dev/null) || continue
    case "$dir" in
      "${tmp%/}"/private-redis-*) kill -9 "$pid" 2>/dev/null && rm -rf "$dir" ;;
    esac
  done < <(ps -eo pid=,ppid=,comm=)
}
trap stop_orphaned_private_redis EXIT
stryker run "$@"
