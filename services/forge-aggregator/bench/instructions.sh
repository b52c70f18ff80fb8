#!/usr/bin/env bash
# Instructions per cache hit, counted by valgrind's callgrind (scripts/callgrind-bench.sh): the
# service (as `pnpm start` runs it, info logging), the service with REDIS_URL set, the service
# without its access line (LOG_LEVEL=warn: what the access log costs), and the bare route
# (bench/bare-server.ts) sending the answer the service gave, headers included. Unlike
# requests/s, the count barely moves with whatever else the machine is doing, so the ratio holds
# on a busy machine too. The service's TTL is an hour, so that every counted request is a hit.
#
#   usage (from services/forge-aggregator): pnpm bench:instructions     [env: N=4000 W=8000]
source ../../scripts/callgrind-bench.sh

HIT=/api/forge/users?user_name=hot-user
pids=()
trap 'kill "${pids[@]}" "$(cat "$work/redis.pid" 2>/dev/null)" 2>/dev/null; rm -rf "$work"' EXIT
redis_port=$(free_port)
redis-server --port "$redis_port" --save '' --appendonly no --dir "$work" --daemonize yes --pidfile "$work/redis.pid" >/dev/null
upstream_port=$(free_port)
PORT=$upstream_port "$NODE" --conditions=@repo/source bench/fake-upstream.ts >/dev/null &
pids+=($!)
until redis-cli -p "$redis_port" ping >/dev/null 2>&1; do sleep 0.1; done
until curl -s -o /dev/null "http://127.0.0.1:$upstream_port/__calls"; do sleep 0.2; done

# Writes the service's answer to a hit (body and headers) where the bare route reads it.
save_answer() {
  "$NODE" -e "
    const { writeFileSync } = require('node:fs')
    fetch('$1').then(async (response) => {
      writeFileSync('$work/body.json', await response.text())
      writeFileSync('$work/headers.json', JSON.stringify(Object.fromEntries(response.headers)))
    })"
}

# Prints the instructions per cache hit of one server: count <source> [env…]
count() {
  local source=$1 port out url
  shift
  port=$(free_port)
  out="$work/callgrind-$port.out"
  url="http://127.0.0.1:$port$HIT"
  redis-cli -p "$redis_port" flushall >/dev/null
  under_callgrind "$out" "$port" "$source" "$@" FORGE_API_URL="http://127.0.0.1:$upstream_port" FORGE_CACHE_TTL_SECONDS=3600 \
    BODY_FILE="$work/body.json" HEADERS_FILE="$work/headers.json"
  until [ "$(curl -s -o /dev/null -w '%{http_code}' "$url")" = 200 ]; do sleep 0.5; done
  # The first service to answer gives the bare route its answer: a hit, as every counted one.
  if [ "$source" = src/server.ts ] && [ ! -e "$work/body.json" ]; then save_answer "$url"; fi
  count_requests "$out" "$url"
}

service=$(median count src/server.ts LOG_LEVEL=info)
shared=$(median count src/server.ts LOG_LEVEL=info REDIS_URL="redis://127.0.0.1:$redis_port")
quiet=$(median count src/server.ts LOG_LEVEL=warn)
bare=$(median count bench/bare-server.ts)
row() { printf '%-24s %12s %8s\n' "$@"; }
ratio() { "$NODE" -p "($bare / $1).toFixed(2)"; }
row '' 'instructions' 'ratio'
row 'bare route' "$bare" ''
row 'service' "$service" "$(ratio "$service")"
row 'service, REDIS_URL' "$shared" "$(ratio "$shared")"
row 'service, LOG_LEVEL=warn' "$quiet" "$(ratio "$quiet")"
echo "instructions per cache hit (main thread), $N requests after $W to warm up, median of $REPS processes; ratio: bare / service (target ≥ 0.8)"
