import t from 'tap'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { SpanKind } from '@opentelemetry/api'
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace'
import { startTracing } from '@repo/service-kit/tracing'
import { eventually, startPrivateRedis } from '@repo/test-support'
import { startLocalUpstream } from './helpers/local-upstream.ts'
import { makeFollowers, makeRepos, makeUser, RESOURCE_HEADERS, SEARCH_HEADERS, searchResult } from './helpers/upstream.ts'

// Started before the app's modules load, as server.ts does: the Redis client is instrumented as it loads.
const exporter = new InMemorySpanExporter()
const tracing = (await startTracing({ serviceName: 'forge-aggregator', env: {}, exporter }))!
const { buildAggregator } = await import('./helpers/build.ts')

const redis = await startPrivateRedis({ durable: false })
const redisUrl = `redis://127.0.0.1:${redis.port}`
t.teardown(async () => {
  await tracing.shutdown()
  await redis.dispose()
})
t.beforeEach(() => exporter.reset())

const CALLER_TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736'
const CALLER_SPAN_ID = '00f067aa0ba902b7'

/** A fake GitHub answering a user's five calls; `answer` may hold or fail one first. */
function answerUser(login: string) {
  return (request: IncomingMessage, response: ServerResponse): void => {
    const path = new URL(request.url!, 'http://upstream').pathname
    const reply = (body: unknown, headers: Record<string, string>) => response.writeHead(200, headers).end(JSON.stringify(body))
    if (path === `/users/${login}`) reply(makeUser(login, { public_repos: 2 }), RESOURCE_HEADERS)
    else if (path === `/users/${login}/repos`) reply(makeRepos(login, 2), RESOURCE_HEADERS)
    else if (path === `/users/${login}/followers`) reply(makeFollowers(1), RESOURCE_HEADERS)
    else if (path === '/search/issues') reply(searchResult(1), SEARCH_HEADERS)
    else response.writeHead(404, { 'content-type': 'application/json' }).end('{"message":"Not Found"}')
  }
}

const traceIdOf = (span: ReadableSpan) => span.spanContext().traceId
const spanIdOf = (span: ReadableSpan) => span.spanContext().spanId
const serverSpans = () => exporter.getFinishedSpans().filter((span) => span.kind === SpanKind.SERVER)

/** Every span of `traceId` below `root`, however deep (the handler's span sits between). */
function descendantsOf(root: ReadableSpan): ReadableSpan[] {
  const spans = exporter.getFinishedSpans().filter((span) => traceIdOf(span) === traceIdOf(root))
  const found: ReadableSpan[] = []
  let parents = new Set([spanIdOf(root)])
  while (parents.size > 0) {
    const children = spans.filter((span) => span.parentSpanContext && parents.has(span.parentSpanContext.spanId))
    found.push(...children)
    parents = new Set(children.map(spanIdOf))
  }
  return found
}

/** `traceparent` as W3C Trace Context writes it: version, trace id, parent span id, flags. */
const traceparentOf = (header: string | string[] | undefined) => /^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$/.exec(String(header))

t.test('one request is one trace: its server span parents each upstream call (a retry as a span of its own) and its Redis commands', async (t) => {
  const answer = answerUser('mona')
  let followersCalls = 0
  const upstream = await startLocalUpstream(t, (request, response) => {
    // The first followers call meets a 503, which the client retries once.
    if (request.url!.startsWith('/users/mona/followers') && followersCalls++ === 0) {
      response.writeHead(503, { 'content-type': 'application/json' }).end('{"message":"unavailable"}')
      return
    }
    answer(request, response)
  })
  const { app } = await buildAggregator(t, { env: { FORGE_API_URL: upstream.url, REDIS_URL: redisUrl } })
  exporter.reset()

  const res = await app.inject({ method: 'GET', url: '/api/forge/users?user_name=mona' })
  t.equal(res.statusCode, 200)

  const [server, ...others] = serverSpans()
  t.equal(others.length, 0, 'one server span')
  t.equal(server!.name, 'GET /api/forge/users')
  t.equal(server!.parentSpanContext, undefined, 'a trace of its own: no caller sent a traceparent')
  t.equal(new Set(exporter.getFinishedSpans().filter((span) => !span.name.startsWith('redis-connect')).map(traceIdOf)).size, 1, 'one trace')

  // The lock's release is sent once the answer is, without waiting for it.
  const released = async () => descendantsOf(server!).some((span) => span.name === 'redis-EVAL')
  t.ok(await eventually(released), 'the lock released')
  const below = descendantsOf(server!)
  const upstreamCalls = below.filter((span) => span.kind === SpanKind.CLIENT && span.attributes['url.full'] !== undefined)
  t.same(
    upstreamCalls.map((span) => new URL(String(span.attributes['url.full'])).pathname).sort(),
    ['/search/issues', '/search/issues', '/users/mona', '/users/mona/followers', '/users/mona/followers', '/users/mona/repos'],
    'five calls, the retried one twice',
  )
  t.same(
    upstreamCalls.filter((span) => String(span.attributes['url.full']).includes('/followers')).map((span) => span.attributes['http.response.status_code']),
    [503, 200],
    'the 503 and its retry',
  )
  const redisCommands = below.filter((span) => span.attributes['db.system.name'] === 'redis').map((span) => span.name)
  t.ok(redisCommands.includes('redis-GET'), 'the shared cache looked up')
  t.ok(redisCommands.includes('redis-SET'), 'the production lock taken (and the answer stored)')
  t.notOk(
    below.some((span) => span.attributes['db.query.text'] !== undefined && span.attributes['db.query.text'] !== span.attributes['db.operation.name']),
    'a Redis span names its command, never its keys or values',
  )

  t.equal(upstream.requests.length, 6)
  for (const request of upstream.requests) {
    const sent = traceparentOf(request.headers.traceparent)
    t.ok(sent, `${request.url} carried a traceparent`)
    t.equal(sent?.[1], traceIdOf(server!), 'of the request’s trace')
    t.ok(
      upstreamCalls.some((span) => spanIdOf(span) === sent?.[2]),
      'its parent is that call’s own span',
    )
  }
})

t.test("a caller's traceparent is continued: the same trace, the caller's span as the server span's parent", async (t) => {
  const upstream = await startLocalUpstream(t, answerUser('octo'))
  const { app } = await buildAggregator(t, { env: { FORGE_API_URL: upstream.url } })
  exporter.reset()

  const res = await app.inject({
    method: 'GET',
    url: '/api/forge/users?user_name=octo',
    headers: { traceparent: `00-${CALLER_TRACE_ID}-${CALLER_SPAN_ID}-01` },
  })
  t.equal(res.statusCode, 200)
  const [server] = serverSpans()
  t.equal(traceIdOf(server!), CALLER_TRACE_ID)
  t.equal(server!.parentSpanContext?.spanId, CALLER_SPAN_ID)
  t.same(new Set(upstream.requests.map((request) => traceparentOf(request.headers.traceparent)?.[1])), new Set([CALLER_TRACE_ID]))
})

t.test("a replica waiting on another's production shows the wait as a span of its own request", async (t) => {
  const answer = answerUser('hubot')
  let unblock = () => {}
  const blocked = new Promise<void>((resolve) => (unblock = resolve))
  const upstream = await startLocalUpstream(t, (request, response) => void blocked.then(() => answer(request, response)))
  const env = { FORGE_API_URL: upstream.url, REDIS_URL: redisUrl }
  const [one, two] = [await buildAggregator(t, { env }), await buildAggregator(t, { env })]
  exporter.reset()

  const first = one.app.inject({ method: 'GET', url: '/api/forge/users?user_name=hubot' })
  t.ok(await eventually(async () => upstream.requests.length > 0), 'the first replica is producing')
  const second = two.app.inject({
    method: 'GET',
    url: '/api/forge/users?user_name=hubot',
    headers: { traceparent: `00-${CALLER_TRACE_ID}-${CALLER_SPAN_ID}-01` },
  })
  // The second replica found the lock taken: its SET NX has come back.
  const lockRefused = async () => exporter.getFinishedSpans().some((span) => traceIdOf(span) === CALLER_TRACE_ID && span.name === 'redis-SET')
  t.ok(await eventually(lockRefused), 'the second replica is waiting')
  unblock()
  const [res1, res2] = await Promise.all([first, second])
  t.equal(res1.statusCode, 200)
  t.equal(res2.headers['cache-status'], 'forge-aggregator; fwd=miss; collapsed')

  const waits = exporter.getFinishedSpans().filter((span) => span.name === 'shared-cache lock wait')
  t.equal(waits.length, 1, 'one wait, on the second replica')
  t.equal(waits[0]!.instrumentationScope.name, 'forge-aggregator', 'under the service’s own tracer, as its other spans are named by their instrumentation')
  const [server] = serverSpans().filter((span) => traceIdOf(span) === CALLER_TRACE_ID)
  t.ok(descendantsOf(server!).includes(waits[0]!), "the wait is in the waiting request's trace")
})

t.test('every log line written inside a traced request carries its trace_id and span_id', async (t) => {
  const upstream = await startLocalUpstream(t, answerUser('lines'))
  const { app, logs } = await buildAggregator(t, { env: { FORGE_API_URL: upstream.url } })
  exporter.reset()

  await app.inject({ method: 'GET', url: '/api/forge/users?user_name=lines', headers: { traceparent: `00-${CALLER_TRACE_ID}-${CALLER_SPAN_ID}-01` } })
  const calls = logs.lines.filter((line) => line.msg === 'upstream call')
  t.equal(calls.length, 5, 'the client logged each call')
  const spanIds = new Set(exporter.getFinishedSpans().map(spanIdOf))
  for (const line of calls) {
    t.equal(line.trace_id, CALLER_TRACE_ID)
    t.ok(spanIds.has(String(line.span_id)), 'the span it was written in')
  }
})

t.test("a retry on a kept-alive connection is a span of the retrying request's trace, not of the connection's first", async (t) => {
  const answers = { mona: answerUser('mona'), lisa: answerUser('lisa') }
  let lisaFollowers = 0
  const upstream = await startLocalUpstream(t, (request, response) => {
    if (request.url!.startsWith('/users/lisa/followers') && lisaFollowers++ === 0) {
      response.writeHead(503, { 'content-type': 'application/json' }).end('{"message":"unavailable"}')
      return
    }
    ;(request.url!.includes('lisa') ? answers.lisa : answers.mona)(request, response)
  })
  const { app } = await buildAggregator(t, { env: { FORGE_API_URL: upstream.url } })
  // The connections are opened inside the first request's trace.
  await app.inject({ method: 'GET', url: '/api/forge/users?user_name=mona' })
  exporter.reset()

  await app.inject({ method: 'GET', url: '/api/forge/users?user_name=lisa', headers: { traceparent: `00-${CALLER_TRACE_ID}-${CALLER_SPAN_ID}-01` } })
  const followerCalls = exporter.getFinishedSpans().filter((span) => String(span.attributes['url.full']).includes('/users/lisa/followers'))
  t.equal(followerCalls.length, 2)
  t.same(followerCalls.map(traceIdOf), [CALLER_TRACE_ID, CALLER_TRACE_ID])
  const retried = upstream.requests.filter((request) => request.url!.startsWith('/users/lisa/followers'))
  t.same(retried.map((request) => traceparentOf(request.headers.traceparent)?.[1]), [CALLER_TRACE_ID, CALLER_TRACE_ID])
})
