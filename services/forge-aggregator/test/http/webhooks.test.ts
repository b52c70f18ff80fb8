import t, { type Test } from 'tap'
import { spawn } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { once } from 'node:events'
import { Readable } from 'node:stream'
import { sign } from '@octokit/webhooks-methods'
import { buildAggregator, metricValue, testClock, type TestAggregator, type TestEnv } from '../helpers/build.ts'
import { INSTALLATION_ID, startAppUpstream, type AppUpstream } from '../helpers/app-upstream.ts'
import { githubDeliveries, payloads, WEBHOOK_PATH, WEBHOOK_SECRET } from '../helpers/webhook-deliveries.ts'

// One replica, no shared Redis: deliveries are remembered in the process, drops are its own.
const github = githubDeliveries()
const DAY_MS = 24 * 60 * 60 * 1000

async function webhookAggregator(t: Test, env: TestEnv = {}): Promise<{ aggregator: TestAggregator; upstream: AppUpstream }> {
  const clock = testClock()
  const upstream = await startAppUpstream(t, clock)
  const built = await buildAggregator(t, { clock, env: { ...upstream.env, FORGE_WEBHOOK_SECRET: WEBHOOK_SECRET, FORGE_CACHE_TTL_SECONDS: 86_400, ...env } })
  return { aggregator: built, upstream }
}

async function users(aggregator: TestAggregator, login: string) {
  const response = await aggregator.app.inject({ url: `/api/forge/users?user_name=${login}` })
  return { status: response.statusCode, cacheStatus: String(response.headers['cache-status']), totalStars: response.json<{ stats: { totalStars: number } }>().stats.totalStars }
}

/** An answer for `login` is held, and the upstream has changed since: only a drop shows the change. */
async function heldThenChanged(t: Test, aggregator: TestAggregator, upstream: AppUpstream, login: string): Promise<number> {
  const first = await users(aggregator, login)
  upstream.stars[login] = 1000
  t.match((await users(aggregator, login)).cacheStatus, /; hit;/)
  return first.totalStars
}

t.test('without FORGE_WEBHOOK_SECRET the path answers 404, like any unknown route', async (t) => {
  const clock = testClock()
  const upstream = await startAppUpstream(t, clock)
  const aggregator = await buildAggregator(t, { clock, env: upstream.env })
  const response = await github.deliver(aggregator.app, 'star', payloads.star('mona', 'hello'))
  t.equal(response.statusCode, 404)
  t.same(response.json(), { error: 'Not Found' })
  t.equal(await aggregator.metric('forge_webhook_deliveries_total'), undefined, 'no webhook metrics either')
})


t.test('a star drops the owner’s answer: the next request revalidates with its ETags and shows the new count', async (t) => {
  const { aggregator, upstream } = await webhookAggregator(t)
  const before = await heldThenChanged(t, aggregator, upstream, 'mona')
  const seen = upstream.requests.length

  const delivered = await github.deliver(aggregator.app, 'star', payloads.star('Mona', 'repo-000'))
  t.equal(delivered.statusCode, 200)
  t.same(delivered.json(), { outcome: 'applied' })

  const after = await users(aggregator, 'mona')
  t.match(after.cacheStatus, /fwd=stale; stored/, 'revalidated')
  t.equal(after.totalStars, 2000)
  t.not(after.totalStars, before)
  const calls = upstream.requests.slice(seen).filter((request) => !request.path.startsWith('/search/'))
  t.equal(calls.length, 3, 'the profile, the repositories and the followers')
  t.ok(calls.every((request) => request.ifNoneMatch !== undefined), 'each a conditional call')
  t.match((await users(aggregator, 'mona')).cacheStatus, /; hit;/, 'then fresh again')
})

t.test('a repeated delivery, by its id or by its body, changes nothing', async (t) => {
  const { aggregator, upstream } = await webhookAggregator(t)
  await users(aggregator, 'mona')
  const first = await github.deliver(aggregator.app, 'star', payloads.star('mona', 'repo-000'))
  t.same(first.json(), { outcome: 'applied' })
  await users(aggregator, 'mona')
  upstream.stars.mona = 7

  t.same((await github.redeliver(aggregator.app, first.id)).json(), { outcome: 'repeat' })
  t.same((await github.deliver(aggregator.app, 'star', payloads.star('mona', 'repo-000'))).json(), { outcome: 'repeat' }, 'the same body under a new id')
  const after = await users(aggregator, 'mona')
  t.match(after.cacheStatus, /; hit;/)
  t.not(after.totalStars, 14)
  t.equal(await aggregator.metric('forge_webhook_deliveries_total', { event: 'star', outcome: 'repeat' }), 2)
})

t.test('a delivery unsigned, wrongly signed, or signed for another body is 401 and changes nothing', async (t) => {
  const { aggregator, upstream } = await webhookAggregator(t)
  const before = await heldThenChanged(t, aggregator, upstream, 'mona')
  const payload = payloads.star('mona', 'repo-000')
  const attempts = {
    unsigned: { signature: null },
    'empty signature': { signature: '' },
    'another secret': { signature: await sign('not-the-secret', JSON.stringify(payload)) },
    'another body': { signature: await sign(WEBHOOK_SECRET, JSON.stringify(payloads.star('mona', 'repo-001'))) },
    'bytes that are not UTF-8': { body: Buffer.from([0x7b, 0xff, 0x7d]), signature: await sign(WEBHOOK_SECRET, '{\ufffd}') },
  }
  for (const [what, options] of Object.entries(attempts)) {
    const response = await github.deliver(aggregator.app, 'star', payload, options)
    t.equal(response.statusCode, 401, what)
    t.same(response.json(), { error: 'Webhook signature missing or invalid' }, what)
  }
  const noBody = await aggregator.app.inject({ method: 'POST', url: WEBHOOK_PATH, headers: { 'x-github-event': 'star' } })
  t.equal(noBody.statusCode, 401, 'no body at all')
  t.equal(noBody.headers['cache-control'], 'no-store')

  const after = await users(aggregator, 'mona')
  t.match(after.cacheStatus, /; hit;/, 'nothing was dropped')
  t.equal(after.totalStars, before)
  t.equal(await aggregator.metric('forge_webhook_deliveries_total', { event: 'star', outcome: 'bad_signature' }), 6)
})

t.test('a body over the bound is 401 unread, signed or not, and changes nothing', async (t) => {
  const { aggregator, upstream } = await webhookAggregator(t)
  const before = await heldThenChanged(t, aggregator, upstream, 'mona')
  const padded = JSON.stringify({ ...payloads.star('mona', 'repo-000'), padding: 'x'.repeat(1024 * 1024) })
  const signature = await sign(WEBHOOK_SECRET, padded)
  const declared = await github.deliver(aggregator.app, 'star', undefined, { body: padded, signature })
  t.equal(declared.statusCode, 401, 'its Content-Length says so')
  // Without a Content-Length, the bound is met while reading.
  const streamed = await github.deliver(aggregator.app, 'star', undefined, { body: Readable.from([padded.slice(0, 600_000), padded.slice(600_000)]), signature })
  t.equal(streamed.statusCode, 401, 'what arrived says so')
  const small = await github.deliver(aggregator.app, 'star', undefined, { body: Readable.from([Buffer.from('{}')]), signature: await sign(WEBHOOK_SECRET, '{}') })
  t.equal(small.statusCode, 200, 'a streamed body within the bound is read')
  t.equal((await users(aggregator, 'mona')).totalStars, before)
})

t.test('a body of exactly 1 MiB is read, with its Content-Length or without; one byte more is refused', async (t) => {
  const { aggregator } = await webhookAggregator(t)
  /** A signed star whose JSON is exactly `bytes` long. */
  const starOf = async (bytes: number) => {
    const unpadded = JSON.stringify({ ...payloads.star('mona', 'repo-000'), padding: '' })
    const body = JSON.stringify({ ...payloads.star('mona', 'repo-000'), padding: 'x'.repeat(bytes - unpadded.length) })
    t.equal(Buffer.byteLength(body), bytes)
    return { body, signature: await sign(WEBHOOK_SECRET, body) }
  }
  const atBound = await starOf(1024 * 1024)
  const overBound = await starOf(1024 * 1024 + 1)
  const split = (body: string) => Readable.from([body.slice(0, 600_000), body.slice(600_000)])

  t.equal((await github.deliver(aggregator.app, 'star', undefined, atBound)).statusCode, 200, '1 MiB, its Content-Length given')
  t.equal((await github.deliver(aggregator.app, 'star', undefined, { ...atBound, body: split(atBound.body) })).statusCode, 200, '1 MiB as it arrives')
  t.equal((await github.deliver(aggregator.app, 'star', undefined, overBound)).statusCode, 401, 'one byte more, its Content-Length given')
  t.equal((await github.deliver(aggregator.app, 'star', undefined, { ...overBound, body: split(overBound.body) })).statusCode, 401, 'one byte more as it arrives')
  t.equal(await aggregator.metric('forge_webhook_deliveries_total', { event: 'star', outcome: 'bad_signature' }), 2)
})

t.test('a client that goes away mid-body is a rejected request (info, not an error), and changes nothing', async (t) => {
  const { aggregator, upstream } = await webhookAggregator(t)
  const before = await heldThenChanged(t, aggregator, upstream, 'mona')
  await aggregator.app.listen({ host: '127.0.0.1', port: 0 })
  const { port } = aggregator.app.server.address() as { port: number }
  const body = JSON.stringify(payloads.star('mona', 'repo-000'))
  const head = [
    `POST ${WEBHOOK_PATH} HTTP/1.1`,
    'Host: x',
    'Content-Type: application/json',
    `Content-Length: ${Buffer.byteLength(body)}`,
    'X-GitHub-Event: star',
    `X-GitHub-Delivery: ${randomUUID()}`,
    `X-Hub-Signature-256: ${await sign(WEBHOOK_SECRET, body)}`,
  ].join('\r\n')
  // From another process: nock, loaded here, holds an outgoing socket until its request is whole.
  // The client sends the headers and part of the signed body, then closes its socket.
  const client = `const socket = require('node:net').connect(${port}, '127.0.0.1', () => socket.write(process.argv[1], () => setTimeout(() => socket.destroy(), 200)))`
  const child = spawn(process.execPath, ['-e', client, `${head}\r\n\r\n${body.slice(0, 20)}`], { stdio: 'ignore' })
  t.equal((await once(child, 'exit'))[0], 0)

  // The body's stream fails: the reader rejects, and the request ends as Fastify's own body parsers end it.
  const rejected = await aggregator.logs.waitFor((line) => line.msg === 'request rejected' && line.reason === 'aborted')
  const incoming = aggregator.logs.lines.find((line) => line.msg === 'incoming request' && (line.req as { url?: string }).url === WEBHOOK_PATH)
  t.equal(rejected.reqId, incoming?.reqId, 'the line is the delivery’s')
  t.notOk(aggregator.logs.lines.some((line) => line.level >= 50), 'nothing logged as an error')
  t.notOk(aggregator.logs.lines.some((line) => line.msg === 'webhook delivery'), 'no delivery was handled')
  for (const outcome of ['applied', 'repeat', 'ignored', 'bad_signature', 'malformed', 'failed']) {
    t.equal(await aggregator.metric('forge_webhook_deliveries_total', { event: 'star', outcome }), 0, `nothing counted as ${outcome}`)
  }
  const after = await users(aggregator, 'mona')
  t.match(after.cacheStatus, /; hit;/, 'nothing was dropped, and the service still answers')
  t.equal(after.totalStars, before)
})

t.test('a signed body that is not JSON, or lacks its event or delivery id, is 401 and changes nothing', async (t) => {
  const { aggregator, upstream } = await webhookAggregator(t)
  const before = await heldThenChanged(t, aggregator, upstream, 'mona')
  const notJson = await github.deliver(aggregator.app, 'star', undefined, { body: 'payload=%7B%7D', headers: { 'content-type': 'application/x-www-form-urlencoded' } })
  t.equal(notJson.statusCode, 401)
  t.same(notJson.json(), { error: 'Webhook delivery is not JSON with its event and delivery id' })
  const noId = await github.deliver(aggregator.app, 'star', payloads.star('mona', 'repo-000'), { id: 'not a guid' })
  t.equal(noId.statusCode, 401)
  const body = JSON.stringify(payloads.star('mona', 'repo-000'))
  const noEvent = await aggregator.app.inject({
    method: 'POST',
    url: WEBHOOK_PATH,
    headers: { 'content-type': 'application/json', 'x-github-delivery': '1', 'x-hub-signature-256': await sign(WEBHOOK_SECRET, body) },
    payload: body,
  })
  t.equal(noEvent.statusCode, 401)
  t.equal((await users(aggregator, 'mona')).totalStars, before)
  t.equal(await aggregator.metric('forge_webhook_deliveries_total', { event: 'star', outcome: 'malformed' }), 2)
  t.equal(await aggregator.metric('forge_webhook_deliveries_total', { event: 'other', outcome: 'malformed' }), 1)
})

t.test('events and actions the service does not use are 200 and change nothing', async (t) => {
  const { aggregator, upstream } = await webhookAggregator(t)
  const before = await heldThenChanged(t, aggregator, upstream, 'mona')
  const ignored: Array<[string, unknown]> = [
    ['ping', { zen: 'Keep it logically awesome.', hook_id: 1 }],
    ['watch', payloads.star('mona', 'repo-000')],
    ['issues', payloads.issue('mona', 'labeled')],
    ['star', { action: 'created', repository: { name: 'repo-000' } }],
    ['installation', payloads.installation('created', Number(INSTALLATION_ID))],
    ['installation', payloads.installation('deleted', 1)],
  ]
  for (const [event, payload] of ignored) {
    const response = await github.deliver(aggregator.app, event, payload)
    t.equal(response.statusCode, 200, event)
    t.same(response.json(), { outcome: 'ignored' }, event)
  }
  t.equal((await users(aggregator, 'mona')).totalStars, before)
  t.equal(upstream.minted.length, 1, 'the installation token is kept')
  t.equal(await aggregator.metric('forge_webhook_deliveries_total', { event: 'other', outcome: 'ignored' }), 1)
  t.equal(await aggregator.metric('forge_webhook_deliveries_total', { event: 'ping', outcome: 'ignored' }), 1)
})

t.test('an issue or pull request by an author drops the author’s answer', async (t) => {
  const { aggregator } = await webhookAggregator(t)
  await users(aggregator, 'mona')
  t.same((await github.deliver(aggregator.app, 'issues', payloads.issue('mona'))).json(), { outcome: 'applied' })
  t.match((await users(aggregator, 'mona')).cacheStatus, /fwd=stale/)
  await github.deliver(aggregator.app, 'pull_request', { action: 'closed', pull_request: { user: { login: 'mona' } } })
  t.match((await users(aggregator, 'mona')).cacheStatus, /fwd=stale/)
})

t.test('installation deleted or suspended: the next call fetches a new installation token', async (t) => {
  const { aggregator, upstream } = await webhookAggregator(t)
  t.same((await github.deliver(aggregator.app, 'installation', { ...payloads.installation('suspend', Number(INSTALLATION_ID)), sender: { login: 'admin' } })).json(), { outcome: 'applied' }, 'before any token: nothing to forget')
  await users(aggregator, 'mona')
  t.equal(upstream.minted.length, 1)
  t.same((await github.deliver(aggregator.app, 'installation', payloads.installation('deleted', Number(INSTALLATION_ID)))).json(), { outcome: 'applied' })
  await users(aggregator, 'hubot')
  t.equal(upstream.minted.length, 2, 'a new token')
  t.ok(upstream.requests.filter((request) => request.path.startsWith('/users/hubot')).every((request) => request.authorization === `Bearer ${upstream.minted[1]}`))
  await github.deliver(aggregator.app, 'installation', payloads.installation('suspend', Number(INSTALLATION_ID)))
  await users(aggregator, 'octocat')
  t.equal(upstream.minted.length, 3)
})

t.test('metrics: deliveries by event and outcome, from zero, and the age of each answer dropped', async (t) => {
  const { aggregator } = await webhookAggregator(t)
  t.equal(await aggregator.metric('forge_webhook_deliveries_total', { event: 'push', outcome: 'failed' }), 0, 'every series from the start')
  await users(aggregator, 'mona')
  aggregator.advanceClock(90_000)
  await github.deliver(aggregator.app, 'push', payloads.star('mona', 'repo-000'))
  await github.deliver(aggregator.app, 'star', payloads.star('mona', 'repo-000'), { signature: null })
  t.equal(await aggregator.metric('forge_webhook_deliveries_total', { event: 'push', outcome: 'applied' }), 1)
  t.equal(await aggregator.metric('forge_webhook_deliveries_total', { event: 'star', outcome: 'bad_signature' }), 1)
  t.equal(await aggregator.metric('forge_webhook_dropped_answer_age_seconds_count'), 1, 'one fresh answer dropped')
  t.equal(await aggregator.metric('forge_webhook_dropped_answer_age_seconds_sum'), 90)
  t.equal(await aggregator.metric('forge_webhook_dropped_answer_age_seconds_bucket', { le: '60' }), 0)
  t.equal(await aggregator.metric('forge_webhook_dropped_answer_age_seconds_bucket', { le: '300' }), 1)
})

t.test('every event label, other included, with every outcome, is on /metrics at 0 before any delivery', async (t) => {
  const { aggregator } = await webhookAggregator(t)
  // Spelled out rather than imported: a label missing from the service's own list must show here.
  const events = ['star', 'fork', 'repository', 'push', 'issues', 'pull_request', 'installation', 'ping', 'other']
  const outcomes = ['applied', 'repeat', 'ignored', 'bad_signature', 'malformed', 'failed']
  const page = (await aggregator.app.inject({ url: '/metrics' })).body
  for (const event of events) {
    for (const outcome of outcomes) t.equal(metricValue(page, 'forge_webhook_deliveries_total', { event, outcome }), 0, `${event} ${outcome}`)
  }
})

t.test('without a shared Redis a delivery is remembered for 3 days, GitHub’s window for redelivering it', async (t) => {
  const { aggregator } = await webhookAggregator(t)
  const first = await github.deliver(aggregator.app, 'star', payloads.star('mona', 'repo-000'))
  t.same(first.json(), { outcome: 'applied' })
  // The process's memory of deliveries keeps time by performance.now(), not by the app's clock.
  const realNow = performance.now.bind(performance)
  let shiftMs = 0
  t.capture(performance, 'now', () => realNow() + shiftMs)
  const after = async (ms: number) => {
    shiftMs = ms
    // lru-cache reuses a reading of the clock for a millisecond.
    await new Promise((resolve) => setTimeout(resolve, 5))
    return (await github.redeliver(aggregator.app, first.id)).json()
  }
  t.same(await after(260_000), { outcome: 'repeat' }, 'after 260 s')
  t.same(await after(DAY_MS), { outcome: 'repeat' }, 'after a day')
  t.same(await after(3 * DAY_MS - 60_000), { outcome: 'repeat' }, 'a minute before 3 days')
  t.same(await after(3 * DAY_MS + 60_000), { outcome: 'applied' }, 'forgotten after 3 days')
})

t.test('one log line per delivery: its event, delivery id, owner and outcome, nothing else of the payload', async (t) => {
  const { aggregator } = await webhookAggregator(t)
  const applied = await github.deliver(aggregator.app, 'star', payloads.star('mona', 'PAYLOAD-REPOSITORY'))
  await github.deliver(aggregator.app, 'star', payloads.star('mona', 'PAYLOAD-REPOSITORY'), { signature: null, id: 'PAYLOAD-NOT-AN-ID' })
  await github.deliver(aggregator.app, 'issues', payloads.issue('hubot'))
  const lines = aggregator.logs.lines.filter((line) => line.msg === 'webhook delivery')
  t.same(
    lines.map((line) => line.webhook),
    [
      { event: 'star', delivery: applied.id, owner: 'mona', outcome: 'applied' },
      { event: 'star', outcome: 'bad_signature' },
      { event: 'issues', delivery: lines[2]?.webhook && (lines[2].webhook as { delivery: string }).delivery, owner: 'hubot', outcome: 'applied' },
    ],
  )
  const written = aggregator.logs.text()
  t.notMatch(written, /PAYLOAD-/, 'no payload content, no unsigned header')
  t.notMatch(written, new RegExp(WEBHOOK_SECRET), 'never the secret')
})

t.test('a signed delivery is exempt from the per-client rate limit; anything else counts against it', async (t) => {
  const { aggregator } = await webhookAggregator(t, { RATE_LIMIT_PER_MINUTE: 2 })
  for (let index = 0; index < 4; index++) {
    t.equal((await github.deliver(aggregator.app, 'ping', {})).statusCode, 200, `signed delivery ${index + 1}`)
  }
  const unsigned = []
  for (let index = 0; index < 3; index++) unsigned.push((await github.deliver(aggregator.app, 'ping', {}, { signature: 'sha256=00' })).statusCode)
  t.same(unsigned, [401, 401, 429], 'an address posting bad signatures is limited')
  t.equal((await github.deliver(aggregator.app, 'ping', {})).statusCode, 200, 'GitHub, from the same address, still is not')
})
