#!/usr/bin/env bash
# Instructions per cache hit, counted by valgrind's callgrind: the service (as `pnpm start` runs
# it, info logging), the service with REDIS_URL set, the service without its access line
# (LOG_LEVEL=warn: what the access log costs), and the bare route (bench/bare-server.ts)
# sending the answer the service gave, headers included. Unlike requests/s, the count does not
# move with whatever else the machine is doing, so the ratio holds on a busy machine too.
# Each server runs under callgrind with instrumentation off; autocannon warms it up (W requests),
# then only its main thread's instructions over N more requests are counted (JIT compilation and
# GC helpers run on other threads, at times no run controls). The service's TTL is an hour, so
# that every counted request is a fresh hit. Needs valgrind (Debian: valgrind).
#
#   usage (from services/forge-aggregator): pnpm bench:instructions     [env: N=4000 W=8000]
set -euo pipefail
command -v valgrind >/dev/null || { echo 'valgrind is missing: apt-get install valgrind' >&2; exit 1; }

N=${N:-4000}
W=${W:-8000}
NODE=$(node -p process.execPath)
AUTOCANNON=./node_modules/.bin/autocannon
PATH_HIT=/api/forge/users?user_name=hot-user
work=$(mktemp -d)
free_port() { node -e "const s=require('net').createServer().listen(0,()=>{console.log(s.address().port);s.close()})"; }
pids=()
trap 'kill "${pids[@]}" "$(cat "$work/redis.pid" 2>/dev/null)" 2>/dev/null; rm -rf "$work"' EXIT

redis_port=$(free_port)
redis-server --port "$redis_port" --save '' --appendonly no --dir "$work" --daemonize yes --pidfile "$work/redis.pid" >/dev/null
upstream_port=$(free_port)
PORT=$upstream_port "$NODE" --conditions=@repo/source bench/fake-upstream.ts >/dev/null &
pids+=($!)
until redis-cli -p "$redis_port" ping >/dev/null 2>&1; do sleep 0.1; done
until curl -s -o /dev/null "http://127.0.0.1:$upstream_port/__calls"; do sleep 0.2; done

# Writes the service's answer for the hit (body and headers) where the bare route reads it.
save_answer() {
  "$NODE" -e "
    const { writeFileSync } = require('node:fs')
    fetch('$1').then(async (response) => {
      writeFileSync('$work/body.json', await response.text())
      writeFileSync('$work/headers.json', JSON.stringify(Object.fromEntries(response.headers)))
    })"
}

# Prints the instructions per request of one server: count <source> [env…]
count() {
  local source=$1; shift
  local port out url
  port=$(free_port)
  out="$work/callgrind-$port.out"
  url="http://127.0.0.1:$port$PATH_HIT"
  redis-cli -p "$redis_port" flushall >/dev/null
  env "$@" PORT="$port" HOST=127.0.0.1 FORGE_API_URL="http://127.0.0.1:$upstream_port" FORGE_CACHE_TTL_SECONDS=3600 \
    BODY_FILE="$work/body.json" HEADERS_FILE="$work/headers.json" SHUTDOWN_DELAY_SECONDS=0 \
    valgrind --tool=callgrind --instr-atstart=no --separate-threads=yes --callgrind-out-file="$out" \
    "$NODE" --conditions=@repo/source "$source" >/dev/null 2>"$work/valgrind.log" &
  local pid=$!
  until [ "$(curl -s -o /dev/null -w '%{http_code}' "$url")" = 200 ]; do sleep 0.5; done
  [ "$source" = src/server.ts ] && [ ! -e "$work/body.json" ] && save_answer "$url"
  "$AUTOCANNON" -c 10 -a "$W" "$url" >/dev/null 2>&1
  # vgdb finds the process by the HOST it was started with.
  HOST=127.0.0.1 callgrind_control -i on "$pid" >/dev/null 2>&1
  "$AUTOCANNON" -c 10 -a "$N" "$url" >/dev/null 2>&1
  HOST=127.0.0.1 callgrind_control -i off "$pid" >/dev/null 2>&1
  kill -INT "$pid"
  wait "$pid" || true
  echo $(( $(awk '/^totals:/ { print $2 }' "$out-01") / N ))
}

service=$(count src/server.ts LOG_LEVEL=info)
shared=$(count src/server.ts LOG_LEVEL=info REDIS_URL="redis://127.0.0.1:$redis_port")
quiet=$(count src/server.ts LOG_LEVEL=warn)
bare=$(count bench/bare-server.ts)
printf '%-24s %12s %8s\n' '' 'instructions' 'ratio'
printf '%-24s %12s %8s\n' 'bare route' "$bare" ''
printf '%-24s %12s %8s\n' 'service' "$service" "$(node -p "($bare / $service).toFixed(2)")"
printf '%-24s %12s %8s\n' 'service, REDIS_URL' "$shared" "$(node -p "($bare / $shared).toFixed(2)")"
printf '%-24s %12s %8s\n' 'service, LOG_LEVEL=warn' "$quiet" "$(node -p "($bare / $quiet).toFixed(2)")"
echo "instructions per cache hit (main thread), $N requests after $W to warm up; ratio: bare / service (target ≥ 0.8)"
