#!/usr/bin/env bash
# Instructions per request, counted by valgrind's callgrind (scripts/callgrind-bench.sh): the
# service against its stack ceiling (bench/ceiling-server.ts), for GET and POST /items/, and the
# service again with tracing on (its spans exported over OTLP/HTTP to a local endpoint that drops
# them). Unlike requests/s and CPU time, the count barely moves with whatever else the machine is
# doing, so the ratio holds on a busy machine too.
#
#   usage (from services/items-list): pnpm bench:instructions     [env: N=4000 W=8000 METHODS='GET POST']
source ../../scripts/callgrind-bench.sh

redis_port=$(free_port)
redis-server --port "$redis_port" --save '' --appendonly no --dir "$work" --daemonize yes --pidfile "$work/redis.pid" >/dev/null
# Where the traced service exports its spans: reads each export and answers 200.
otlp_port=$(free_port)
"$NODE" -e "require('http').createServer((req, res) => req.resume().on('end', () => res.end('{}'))).listen($otlp_port, '127.0.0.1')" &
otlp_pid=$!
trap 'kill "$otlp_pid" "$(cat "$work/redis.pid")" 2>/dev/null; rm -rf "$work"' EXIT
until redis-cli -p "$redis_port" ping >/dev/null 2>&1; do sleep 0.1; done
# The list the GET answers: the bench's 100 names.
mapfile -t names < <("$NODE" --conditions=@repo/source -e "import('./bench/names.ts').then(({ PREFILLED_NAMES }) => console.log(PREFILLED_NAMES.join('\\n')))")

# Prints the instructions per request of one server: count <GET|POST> <source> [env…]
count() {
  local method=$1 source=$2 port out body=()
  shift 2
  port=$(free_port)
  out="$work/callgrind-$port.out"
  [ "$method" = POST ] && body=(-m POST -H 'content-type: application/json' -b '{"name":"benchmarked item"}')
  redis-cli -p "$redis_port" del items >/dev/null
  redis-cli -p "$redis_port" rpush items "${names[@]}" >/dev/null
  profile_note=$method
  under_callgrind "$out" "$port" "$source" "$@" REDIS_HOST=127.0.0.1 REDIS_PORT="$redis_port"
  until curl -s -o /dev/null "http://127.0.0.1:$port/items/"; do sleep 0.5; done
  count_requests "$out" "${body[@]}" "http://127.0.0.1:$port/items/"
}

printf '%-6s %14s %14s %8s %18s\n' '' 'stack ceiling' 'service' 'ratio' 'service, traced'
for method in ${METHODS:-GET POST}; do
  ceiling=$(median count "$method" bench/ceiling-server.ts CEILING=stack)
  service=$(median count "$method" src/server.ts LOG_LEVEL=info)
  traced=$(median count "$method" src/server.ts LOG_LEVEL=info OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$otlp_port")
  printf '%-6s %14s %14s %8s %18s\n' "$method" "$ceiling" "$service" "$("$NODE" -p "($ceiling / $service).toFixed(2)")" "$traced"
done
echo "instructions per request (main thread), $N requests after $W to warm up, median of $REPS processes; ratio: ceiling / service (target ≥ 0.9)"
