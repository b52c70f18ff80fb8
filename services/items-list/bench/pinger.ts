/**
 * A PING every 2 ms on a connection of its own, in a process of its own (so that the benchmark's
 * work cannot delay it): the longest wait for a PONG is the longest Redis stalled, for everyone.
 * On each line of stdin it prints the longest round trip since the last line, in ms, and starts
 * over. Usage: REDIS_PORT=<port> node bench/pinger.ts
 */
import { connect } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'

const INTERVAL_MS = 2
const socket = connect(Number(process.env.REDIS_PORT), '127.0.0.1')
socket.setNoDelay(true)
let longest = 0
let answered: (() => void) | undefined
socket.on('data', () => answered?.())

process.stdin.on('data', () => {
  process.stdout.write(`${longest.toFixed(2)}\n`)
  longest = 0
})
process.stdin.on('end', () => process.exit(0))

for (;;) {
  const started = performance.now()
  await new Promise<void>((resolve) => {
    answered = resolve
    socket.write('PING\r\n')
  })
  longest = Math.max(longest, performance.now() - started)
  await sleep(INTERVAL_MS)
}
