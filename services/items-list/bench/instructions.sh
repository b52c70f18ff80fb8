#!/usr/bin/env bash
# Instructions per request, counted by valgrind's callgrind: the service against its stack ceiling
# (bench/ceiling-server.ts), for GET and POST /items/, and the service again with tracing on (its
# spans exported over OTLP/HTTP to a local endpoint that drops them). Unlike requests/s and CPU time, the count does
# not move with whatever else the machine is doing, so the ratio holds on a busy machine too.
# Each server runs under callgrind with instrumentation off; autocannon warms it up (W requests),
# then only its main thread's instructions over N more requests are counted (JIT compilation and
# GC helpers run on other threads, at times no run controls). Needs valgrind (Debian: valgrind).
#
#   usage (from services/items-list): pnpm bench:instructions     [env: N=4000 W=8000]
set -euo pipefail
command -v valgrind >/dev/null || { echo 'valgrind is missing: apt-get install valgrind' >&2; exit 1; }

N=${N:-4000}
W=${W:-8000}
NODE=$(node -p process.execPath)
AUTOCANNON=./node_modules/.bin/autocannon
work=$(mktemp -d)
free_port() { node -e "const s=require('net').createServer().listen(0,()=>{console.log(s.address().port);s.close()})"; }

redis_port=$(free_port)
redis-server --port "$redis_port" --save '' --appendonly no --dir "$work" --daemonize yes --pidfile "$work/redis.pid" >/dev/null
# Where the traced service exports its spans: reads each export and answers 200.
otlp_port=$(free_port)
node -e "require('http').createServer((req, res) => req.resume().on('end', () => res.end('{}'))).listen($otlp_port, '127.0.0.1')" &
otlp_pid=$!
trap 'kill "$otlp_pid" "$(cat "$work/redis.pid")" 2>/dev/null; rm -rf "$work"' EXIT
until redis-cli -p "$redis_port" ping >/dev/null 2>&1; do sleep 0.1; done

# Prints the instructions per request of one server: count <GET|POST> <source> [env…]
count() {
  local method=$1 source=$2; shift 2
  local port out body=()
  port=$(free_port)
  out="$work/callgrind-$port.out"
  [ "$method" = POST ] && body=(-m POST -H 'content-type: application/json' -b '{"name":"benchmarked item"}')
  redis-cli -p "$redis_port" del items >/dev/null
  # The list the GET answers: the bench's 100 names.
  local names
  mapfile -t names < <(node --conditions=@repo/source -e "import('./bench/names.ts').then(({ PREFILLED_NAMES }) => console.log(PREFILLED_NAMES.join('\\n')))")
  redis-cli -p "$redis_port" rpush items "${names[@]}" >/dev/null
  env "$@" PORT="$port" HOST=127.0.0.1 REDIS_HOST=127.0.0.1 REDIS_PORT="$redis_port" SHUTDOWN_DELAY_SECONDS=0 \
    valgrind --tool=callgrind --instr-atstart=no --separate-threads=yes --callgrind-out-file="$out" \
    "$NODE" --conditions=@repo/source "$source" >/dev/null 2>"$work/valgrind.log" &
  local pid=$!
  until curl -s -o /dev/null "http://127.0.0.1:$port/items/"; do sleep 0.5; done
  "$AUTOCANNON" -c 10 -a "$W" "${body[@]}" "http://127.0.0.1:$port/items/" >/dev/null 2>&1
  # vgdb finds the process by the HOST it was started with.
  HOST=127.0.0.1 callgrind_control -i on "$pid" >/dev/null 2>&1
  "$AUTOCANNON" -c 10 -a "$N" "${body[@]}" "http://127.0.0.1:$port/items/" >/dev/null 2>&1
  HOST=127.0.0.1 callgrind_control -i off "$pid" >/dev/null 2>&1
  kill -INT "$pid"
  wait "$pid" || true
  echo $(( $(awk '/^totals:/ { print $2 }' "$out-01") / N ))
}

printf '%-6s %14s %14s %8s %18s\n' '' 'stack ceiling' 'service' 'ratio' 'service, traced'
for method in GET POST; do
  ceiling=$(count "$method" bench/ceiling-server.ts CEILING=stack)
  service=$(count "$method" src/server.ts LOG_LEVEL=info)
  traced=$(count "$method" src/server.ts LOG_LEVEL=info OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$otlp_port")
  printf '%-6s %14s %14s %8s %18s\n' "$method" "$ceiling" "$service" "$(node -p "($ceiling / $service).toFixed(2)")" "$traced"
done
echo "instructions per request (main thread), $N requests after $W to warm up; ratio: ceiling / service (target ≥ 0.9)"
