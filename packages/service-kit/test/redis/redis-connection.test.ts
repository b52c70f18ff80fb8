import t, { type Test } from 'tap'
import { Registry } from 'prom-client'
import { createClient, defineScript } from 'redis'
import { createPrivateRedis, eventually, startPrivateRedis, type PrivateRedis, captureLogs } from '@repo/test-support'
import { createLogger, createRedisConnection, RedisUnavailableError, type CommandOutcome, type RedisTarget } from '../../src/index.ts'

const DEADLINE_MS = 200

interface Harness {
  redis: PrivateRedis
  connection: ReturnType<typeof createRedisConnection>
  lines: Record<string, unknown>[]
  outcomes: CommandOutcome[]
  /** Each command's duration as reported to `onCommand`, in seconds. */
  durations: number[]
  registry: Registry
  upValue: () => Promise<number | undefined>
}

async function connect(t: Test, target?: (port: number) => RedisTarget): Promise<Harness> {
  const redis = await startPrivateRedis()
  const logs = captureLogs()
  const { lines } = logs
  const outcomes: CommandOutcome[] = []
  const durations: number[] = []
  const registry = new Registry()
  const connection = createRedisConnection({
    target: target?.(redis.port) ?? { host: '127.0.0.1', port: redis.port },
    logger: createLogger('info', logs.destination),
    purpose: 'test store',
    deadlineMs: DEADLINE_MS,
    probeIntervalMs: 50,
    onCommand: (_command, outcome, seconds) => {
      outcomes.push(outcome)
      durations.push(seconds)
    },
    up: { registry, name: 'test_store_up', help: 'whether Redis answers' },
  })
  t.teardown(async () => {
    await connection.close()
    await redis.dispose()
  })
  if (!(await eventually(async () => connection.isAvailable))) throw new Error('never connected')
  const upValue = async () => (await registry.getSingleMetric('test_store_up')?.get())?.values[0]?.value
  return { redis, connection, lines, outcomes, durations, registry, upValue }
}

const ping = (connection: Harness['connection']) => connection.run('ping', async (client) => client.ping())
const messages = (lines: Record<string, unknown>[], msg: string) => lines.filter((line) => line.msg === msg)

t.test('commands are answered and reported ok with their duration in seconds, and the up gauge says 1', async (t) => {
  const { connection, outcomes, durations, upValue } = await connect(t)
  t.equal(await connection.run('set', (client) => client.set('k', 'v')), 'OK')
  t.equal(await connection.run('get', (client) => client.get('k')), 'v')
  t.same(outcomes, ['ok', 'ok'])
  // A local Redis answers in well under a millisecond: a duration in ms (or µs) would not pass.
  t.ok(durations.every((seconds) => seconds >= 0 && seconds < 0.1), `in seconds: ${durations.join(', ')}`)
  t.equal(await upValue(), 1)
})

t.test('Redis down: commands fail at once, the outage is logged once, and the connection comes back by itself', async (t) => {
  const { redis, connection, lines, outcomes, upValue } = await connect(t)
  await redis.stop()
  await eventually(async () => !connection.isAvailable)
  for (let attempt = 0; attempt < 5; attempt++) {
    const started = performance.now()
    await t.rejects(ping(connection), RedisUnavailableError)
    // At once, not after a deadline: 50 ms was outlasted by this process's own turn at load 12-17.
    t.ok(performance.now() - started < DEADLINE_MS, `without waiting (${Math.round(performance.now() - started)} ms)`)
  }
  t.ok(outcomes.every((outcome) => outcome === 'error'), 'refused, none timed out')
  t.equal(await upValue(), 0)
  // Several reconnection attempts fail meanwhile; the log says so once.
  t.ok(await eventually(async () => messages(lines, 'Redis unavailable; reconnecting in the background').length === 1))

  await redis.start()
  t.ok(await eventually(async () => connection.isAvailable), 'reconnected')
  t.equal(await ping(connection), 'PONG')
  t.equal(messages(lines, 'Redis unavailable; reconnecting in the background').length, 1, 'still one outage line')
  t.equal(messages(lines, 'Redis connection ready').length, 2, 'ready at start and once back')
})

t.test('the epoch stays while commands are answered, and goes up when the connection drops and is made again', async (t) => {
  const { redis, connection } = await connect(t)
  const connected = connection.epoch
  for (let command = 0; command < 20; command++) await ping(connection)
  t.equal(connection.epoch, connected, 'commands answered: the same connection')

  await redis.stop()
  t.ok(await eventually(async () => connection.epoch > connected), 'up as soon as it drops')
  await redis.start()
  t.ok(await eventually(async () => connection.isAvailable), 'reconnected')
  const reconnected = connection.epoch
  t.ok(reconnected > connected, `up once connected again (${connected} then ${reconnected})`)
  await ping(connection)
  t.equal(connection.epoch, reconnected, 'then it stays')
})

t.test('Redis silent: a command waits its deadline only, then Redis is set aside until a probe gets an answer', async (t) => {
  const { redis, connection, outcomes, upValue } = await connect(t)
  redis.pause()
  const started = performance.now()
  const error = await ping(connection).catch((failure: unknown) => failure)
  const waited = performance.now() - started
  t.ok(error instanceof RedisUnavailableError && error.timedOut, 'a timeout')
  t.equal((error as Error).message, `Redis did not answer within ${DEADLINE_MS} ms`, 'the message says how long it waited')
  t.ok(waited >= DEADLINE_MS && waited < DEADLINE_MS + 300, `after the deadline (${Math.round(waited)} ms)`)
  t.notOk(connection.isAvailable, 'set aside')
  t.equal(await upValue(), 0)

  const [first, second] = await Promise.allSettled([ping(connection), ping(connection)])
  t.equal(first.status, 'rejected', 'while set aside')
  t.equal(second.status, 'rejected')

  const next = performance.now()
  await t.rejects(ping(connection), RedisUnavailableError)
  t.ok(performance.now() - next < 50, 'the next command fails at once')
  t.same(outcomes, ['timeout', 'error', 'error', 'error'])

  redis.resume()
  t.ok(await eventually(async () => connection.isAvailable), 'a probe brought it back')
  t.equal(await ping(connection), 'PONG')
})

/** Keeps this process's event loop to itself for `ms`, as a burst of requests does. */
function busyFor(ms: number): void {
  const end = performance.now() + ms
  while (performance.now() < end) {
    // Nothing: the point is that nothing else runs.
  }
}

t.test('a command sent just before this process is busy for longer than the deadline is answered: Redis is not set aside', async (t) => {
  const { connection, outcomes } = await connect(t)
  // Sent from a setImmediate callback, as a burst of requests may be: the client writes it on the
  // next turn of the event loop, which comes only once this process is done with its own work,
  // after the timers of that turn have run.
  const { answer } = await new Promise<{ answer: Promise<string> }>((resolve) =>
    setImmediate(() => {
      const answer = ping(connection)
      busyFor(DEADLINE_MS * 3)
      resolve({ answer })
    }),
  )
  t.equal(await answer, 'PONG')
  t.ok(connection.isAvailable, 'still available')
  t.same(outcomes, ['ok'])
})

t.test('an answer that waited behind this process’s own work for longer than the deadline counts: Redis is not set aside', async (t) => {
  const { connection, outcomes } = await connect(t)
  const answer = ping(connection)
  // Written, and answered at once by Redis; the answer then waits in the socket.
  await new Promise((resolve) => setImmediate(resolve))
  busyFor(DEADLINE_MS * 3)
  t.equal(await answer, 'PONG')
  t.ok(connection.isAvailable, 'still available')
  t.same(outcomes, ['ok'])
})

t.test('a burst of commands larger than a socket buffer is written at once: none waits unwritten behind this process’s work', async (t) => {
  const { connection, outcomes } = await connect(t)
  // 400 KB in one turn, as a burst of appends may be: more than the 16 KB a socket takes by
  // default before node-redis waits for it to drain.
  const value = 'x'.repeat(1_024)
  const answers = Array.from({ length: 400 }, (_, index) => connection.run('set', async (client) => client.set(`burst:${index}`, value)))
  await new Promise((resolve) => setImmediate(resolve))
  busyFor(DEADLINE_MS * 3)
  t.same(new Set(await Promise.all(answers)), new Set(['OK']))
  t.ok(connection.isAvailable, 'still available')
  t.same(new Set(outcomes), new Set(['ok']))
})

t.test('a command queued past its deadline behind others Redis answers one by one sets Redis aside: no backlog is left to grow', async (t) => {
  const deadlineMs = 1_000
  const redis = await startPrivateRedis({ durable: false })
  t.teardown(() => redis.dispose())
  const logs = captureLogs()
  const connection = createRedisConnection({
    target: { host: '127.0.0.1', port: redis.port },
    logger: createLogger('info', logs.destination),
    purpose: 'appends waiting for replicas',
    deadlineMs,
  })
  t.teardown(() => connection.close())
  t.ok(await eventually(async () => connection.isAvailable))
  // WAIT blocks the connection it runs on, as appends that wait for replicas do: with no replica
  // each of these five ends after 300 ms, and the next begins only then. Redis keeps answering,
  // but the last ones would wait 1.2 and 1.5 s: a Redis that slow is set aside, so that commands
  // fail at once instead of queueing behind each other for ever longer.
  const waits = await Promise.allSettled(Array.from({ length: 5 }, () => connection.run('wait', (client) => client.wait(1, 300))))
  t.same(waits[0], { status: 'fulfilled', value: 0 }, 'the first is answered: no replica confirmed')
  t.match(waits[4], { status: 'rejected', reason: { timedOut: true } }, 'the last is given up at its deadline')
  t.equal(messages(logs.lines, 'Redis unavailable; reconnecting in the background').length, 1, 'Redis is set aside')
})

t.test('a command Redis refuses fails alone: Redis is not set aside', async (t) => {
  const { connection, outcomes } = await connect(t)
  await connection.run('set', (client) => client.set('text', 'v'))
  const error = await connection.run('lpush', (client) => client.lPush('text', 'x')).catch((failure: unknown) => failure)
  t.ok(error instanceof RedisUnavailableError && !error.timedOut)
  t.match((error as Error).cause, { message: /WRONGTYPE/ })
  t.ok(connection.isAvailable)
  t.equal(await ping(connection), 'PONG')
  t.same(outcomes, ['ok', 'error', 'ok'])
})

t.test('close closes the connection and its duplicates', async (t) => {
  const { connection } = await connect(t)
  const subscriber = connection.duplicate()
  await subscriber.connect()
  await connection.close()
  t.notOk(connection.client.isOpen)
  t.notOk(subscriber.isOpen)
})

t.test('the log says where it connects, never the password of a URL', async (t) => {
  const { lines } = await connect(t, (port) => ({ url: `redis://:hunter2@127.0.0.1:${port}/0` }))
  const connecting = messages(lines, 'connecting to Redis')[0]
  t.match(connecting, { purpose: 'test store', url: /^redis:\/\/127\.0\.0\.1:\d+\/0$/ })
  t.notMatch(JSON.stringify(lines), 'hunter2')
})

t.test('the log says which host, port and database it connects to (database 0 unless given)', async (t) => {
  const { redis, lines } = await connect(t)
  t.match(messages(lines, 'connecting to Redis')[0], { purpose: 'test store', host: '127.0.0.1', port: redis.port, database: 0 })
  const inDb3 = await connect(t, (port) => ({ host: '127.0.0.1', port, database: 3 }))
  t.match(messages(inDb3.lines, 'connecting to Redis')[0], { database: 3 })
})

t.test('a URL says where commands go: its host, its port and its database', async (t) => {
  const redis = await startPrivateRedis()
  t.teardown(() => redis.dispose())
  const inspector = createClient({ socket: { host: '127.0.0.1', port: redis.port }, database: 4 })
  await inspector.connect()
  t.teardown(() => inspector.destroy())
  await inspector.set('where', 'the private Redis, database 4')
  const connection = createRedisConnection({
    target: { url: `redis://127.0.0.1:${redis.port}/4` },
    logger: createLogger('silent', { write: () => {} }),
    purpose: 'by url',
  })
  t.teardown(() => connection.close())
  t.ok(await eventually(async () => connection.isAvailable))
  t.equal(await connection.run('get', (client) => client.get('where')), 'the private Redis, database 4')
})

t.test('several commands missing their deadline together set Redis aside once, and every probe that answers late is ignored', async (t) => {
  const { redis, connection, lines } = await connect(t)
  // Every PING sent from here on (the test's three, then the probes) is counted, its answer kept.
  const probes: Promise<unknown>[] = []
  let probed = () => {}
  const sendPing = connection.client.ping.bind(connection.client)
  t.capture(connection.client, 'ping', () => {
    const answer = sendPing()
    probes.push(answer.catch(() => {}))
    probed()
    return answer
  })
  redis.pause()
  const failures = await Promise.allSettled([ping(connection), ping(connection), ping(connection)])
  t.ok(failures.every((result) => result.status === 'rejected'))
  t.ok(await eventually(async () => probes.length >= 3 + 3), 'three probes pile up behind the silent Redis')
  redis.resume()
  t.ok(await eventually(async () => connection.isAvailable))
  t.equal(messages(lines, 'Redis unavailable; reconnecting in the background').length, 1)
  t.equal(messages(lines, 'Redis connection ready').length, 2, 'ready at start, and back once')

  // Probing stops with the recovery: a probe left running would PING Redis every 50 ms forever.
  // Once the piled-up probes have their answers, six probe intervals must pass without another.
  await Promise.all(probes)
  const another = new Promise((resolve) => (probed = () => resolve('probed again')))
  t.equal(await Promise.race([another, new Promise((resolve) => setTimeout(resolve, 6 * 50, 'no probe'))]), 'no probe', 'no PING once Redis is back')
})

t.test('a password, a database and scripts are used as given', async (t) => {
  const redis = await startPrivateRedis({ args: ['--requirepass', 'pa55'] })
  t.teardown(() => redis.dispose())
  const connection = createRedisConnection({
    target: { host: '127.0.0.1', port: redis.port, password: 'pa55', database: 3 },
    scripts: { double: defineScript({ SCRIPT: 'return ARGV[1] * 2', NUMBER_OF_KEYS: 0, parseCommand: (parser, value: string) => parser.push(value), transformReply: (reply: unknown) => Number(reply) }) },
    logger: createLogger('silent', { write: () => {} }),
    purpose: 'authenticated',
  })
  t.teardown(() => connection.close())
  t.ok(await eventually(async () => connection.isAvailable), 'authenticated')
  await connection.run('set', (client) => client.set('where', 'here'))
  t.equal(await connection.run('double', (client) => client.double('21')), 42)
  const inspector = createClient({ socket: { host: '127.0.0.1', port: redis.port }, password: 'pa55', database: 3 })
  await inspector.connect()
  t.teardown(() => inspector.destroy())
  t.equal(await inspector.get('where'), 'here', 'in database 3')
})

t.test('close does not wait on a silent Redis longer than the deadline: the connection is dropped, its command in flight fails', async (t) => {
  const { redis, connection, lines } = await connect(t)
  redis.pause()
  t.teardown(() => redis.resume())
  // A command in flight: close() would wait for its answer.
  const inFlight = connection.client.ping().then(
    () => 'answered',
    () => 'failed',
  )
  const started = performance.now()
  await connection.close()
  t.ok(performance.now() - started < DEADLINE_MS + 300, 'closed within the deadline')
  t.notOk(connection.client.isOpen)
  // Still paused: only a dropped connection settles it.
  t.equal(await Promise.race([inFlight, new Promise((resolve) => setTimeout(resolve, 500, 'still waiting'))]), 'failed')
  t.equal(messages(lines, 'Redis connection closed').length, 1, 'and says so')
})

t.test('a Redis down from the start is reported unavailable, naming the connection and why', async (t) => {
  const redis = await createPrivateRedis()
  t.teardown(() => redis.dispose())
  const logs = captureLogs()
  const connection = createRedisConnection({
    target: { host: '127.0.0.1', port: redis.port },
    logger: createLogger('info', logs.destination),
    purpose: 'late store',
  })
  t.teardown(() => connection.close())
  t.match(await logs.waitFor((line) => line.msg === 'Redis unavailable; reconnecting in the background'), {
    level: 40,
    purpose: 'late store',
    port: redis.port,
    err: { message: /ECONNREFUSED/ },
  })
  await redis.start()
  t.ok(await eventually(async () => connection.isAvailable), 'and connects once Redis is up')
})

t.test('while Redis is down, a command sent on the client itself (the rate limit does) fails at once instead of waiting in a queue', async (t) => {
  const { redis, connection } = await connect(t)
  await redis.stop()
  t.ok(await eventually(async () => !connection.client.isReady))
  const sent = connection.client.ping().then(
    () => 'answered',
    () => 'failed',
  )
  t.equal(await Promise.race([sent, new Promise((resolve) => setTimeout(resolve, 500, 'queued'))]), 'failed')
  await redis.start()
})

t.test('a duplicate (a subscriber) survives Redis going away, and reconnects with it', async (t) => {
  const { redis, connection } = await connect(t)
  const subscriber = connection.duplicate()
  await subscriber.connect()
  // Without an 'error' listener, the duplicate's socket error would crash the process here.
  await redis.stop()
  t.ok(await eventually(async () => !subscriber.isReady), 'lost')
  await redis.start()
  t.ok(await eventually(async () => subscriber.isReady), 'back')
})

t.test('a Redis set aside, then restarted, is announced ready once', async (t) => {
  const { redis, connection, lines } = await connect(t)
  redis.pause()
  await t.rejects(ping(connection), RedisUnavailableError)
  t.notOk(connection.isAvailable, 'set aside')
  await redis.stop()
  await redis.start()
  t.ok(await eventually(async () => connection.isAvailable), 'back')
  t.equal(messages(lines, 'Redis connection ready').length, 2, 'ready at start, and back once')
})

t.test('Redis down: reconnecting backs off from 50 ms to half a second, and no further', async (t) => {
  const { redis, connection } = await connect(t)
  // Ten attempts: enough for a backoff without a ceiling to pass a second (the sixth gap would
  // be 1.6 s); ten seconds at most, should they never come.
  const attempts: number[] = []
  connection.client.on('reconnecting', () => attempts.push(performance.now()))
  await redis.stop()
  t.ok(await eventually(async () => attempts.length >= 10, 200), `kept trying: ${attempts.length} attempts`)
  const gaps = attempts.slice(1, 10).map((at, index) => at - attempts[index]!)
  t.ok(Math.min(...gaps) >= 45, `not hammering: gaps of ${gaps.map(Math.round).join(', ')} ms`)
  t.ok(Math.max(...gaps) < 1_000, `back soon after a restart: gaps of ${gaps.map(Math.round).join(', ')} ms`)
  await redis.start()
  t.ok(await eventually(async () => connection.isAvailable))
})

t.test('a connection that never reached Redis closes at once', async (t) => {
  const redis = await startPrivateRedis()
  await redis.dispose()
  const connection = createRedisConnection({
    target: { host: '127.0.0.1', port: redis.port },
    logger: createLogger('silent', { write: () => {} }),
    purpose: 'never connected',
  })
  await t.rejects(ping(connection), RedisUnavailableError)
  await connection.close()
  t.notOk(connection.isAvailable)
})
