# Sourced by the services' bench/instructions.sh (from the package directory): instructions per
# request on a server's main thread, counted by valgrind's callgrind. A server runs under callgrind
# with instrumentation off; autocannon warms it up (W requests), then only its main thread's
# instructions over N more requests are counted (JIT compilation and GC helpers run on other
# threads, at times no run controls). Needs valgrind (Debian: valgrind).
#
# With PROFILE=<dir>, each server also runs with V8's perf map (`--perf-basic-prof`), and its
# counts and map are kept in <dir> as <source>-<port>.callgrind and .map, listed with their
# settings (and `profile_note`, when the caller sets it) in <dir>/index.txt:
# `node scripts/callgrind-functions.ts` reads them per function.
set -euo pipefail
command -v valgrind >/dev/null || { echo 'valgrind is missing: apt-get install valgrind' >&2; exit 1; }

N=${N:-4000}
W=${W:-8000}
# Each figure is the median of REPS servers counted one after the other: a process's count can
# differ from the next one's by 5-15% (how V8's megamorphic caches and the GC's helper threads
# happen to fall for that process), while the median of three moves by a few percent.
REPS=${REPS:-3}
NODE=$(node -p process.execPath)
AUTOCANNON=./node_modules/.bin/autocannon
work=$(mktemp -d)

free_port() { "$NODE" -e "const s=require('net').createServer().listen(0,()=>{console.log(s.address().port);s.close()})"; }

# Starts `source` under callgrind in the background, its main thread's counts going to
# `out`-01, with PORT, HOST and `env` set: under_callgrind <out> <port> <source> [env…].
# Sets `server_pid`.
under_callgrind() {
  local out=$1 port=$2 source=$3
  shift 3
  local profiling=()
  # V8's own log file, which the perf map would otherwise bring along, is not wanted.
  [ -n "${PROFILE:-}" ] && profiling=(--perf-basic-prof --logfile=/dev/null)
  env "$@" PORT="$port" HOST=127.0.0.1 SHUTDOWN_DELAY_SECONDS=0 \
    valgrind --tool=callgrind --instr-atstart=no --separate-threads=yes --callgrind-out-file="$out" \
    "$NODE" "${profiling[@]}" --conditions=@repo/source "$source" >/dev/null 2>"$work/valgrind.log" &
  server_pid=$!
  server_label="$(basename "$source" .ts)-$port"
  [ -n "${PROFILE:-}" ] && mkdir -p "$PROFILE" && echo "$server_label ${profile_note:+$profile_note }$*" >>"$PROFILE/index.txt"
  return 0
}

# Warms the server up, counts N requests, stops it, and prints its instructions per request:
# count_requests <out> <autocannon arguments…> (the URL last).
count_requests() {
  local out=$1
  shift
  "$AUTOCANNON" -c 10 -a "$W" "$@" >/dev/null 2>&1
  # vgdb finds the process by the HOST it was started with.
  HOST=127.0.0.1 callgrind_control -i on "$server_pid" >/dev/null 2>&1
  "$AUTOCANNON" -c 10 -a "$N" "$@" >/dev/null 2>&1
  HOST=127.0.0.1 callgrind_control -i off "$server_pid" >/dev/null 2>&1
  kill -INT "$server_pid"
  wait "$server_pid" || true
  if [ -n "${PROFILE:-}" ]; then
    cp "$out-01" "$PROFILE/$server_label.callgrind"
    mv "/tmp/perf-$server_pid.map" "$PROFILE/$server_label.map"
  fi
  echo $(($(awk '/^totals:/ { print $2 }' "$out-01") / N))
}

# Runs `command` REPS times and prints the median of what it printed (one number each); every
# count goes to stderr: median <command> [arguments…].
median() {
  local counts=() i
  for ((i = 0; i < REPS; i++)); do counts+=("$("$@")"); done
  echo "$* → ${counts[*]}" >&2
  printf '%s\n' "${counts[@]}" | sort -n | sed -n "$(((REPS + 1) / 2))p"
}
