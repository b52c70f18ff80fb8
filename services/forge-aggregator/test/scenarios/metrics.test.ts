import t from 'tap'
import nock from 'nock'
import { buildAggregator } from '../helpers/build.ts'
import { API, RESOURCE_HEADERS, fixtures, mockUser } from '../helpers/upstream.ts'

t.afterEach(() => {
  nock.cleanAll()
})

t.test('forge_cache_results_total counts answers by endpoint and how they were obtained', async (t) => {
  const { app, metric, advanceClock } = await buildAggregator(t)
  mockUser({ login: 'mona' })
  await app.inject({ method: 'GET', url: '/api/forge/users?user_name=mona' })
  await app.inject({ method: 'GET', url: '/api/forge/users?user_name=mona' })
  await app.inject({ method: 'GET', url: '/api/forge/users?user_name=mona' })
  advanceClock(60_001)
  nock(API).get(/.*/).query(true).reply(502, { message: 'Bad Gateway' }).persist()
  await app.inject({ method: 'GET', url: '/api/forge/users?user_name=mona' })
  t.equal(await metric('forge_cache_results_total', { endpoint: 'users', result: 'miss' }), 1)
  t.equal(await metric('forge_cache_results_total', { endpoint: 'users', result: 'hit' }), 2)
  t.equal(await metric('forge_cache_results_total', { endpoint: 'users', result: 'stale' }), 1)
  t.equal(await metric('forge_cache_results_total', { endpoint: 'repos', result: 'hit' }), 0, 'every series exists from the start')
})

t.test('forge_upstream_requests_total and its duration count every call by resource and status, error when none came', async (t) => {
  const { app, metric } = await buildAggregator(t)
  mockUser({ login: 'mona' })
  await app.inject({ method: 'GET', url: '/api/forge/users?user_name=mona' })
  nock(API).get('/repos/octocat/gone').reply(404, { message: 'Not Found' })
  await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=gone' })
  nock(API).get('/repos/octocat/broken').times(3).replyWithError('socket went away')
  await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=broken' })
  t.equal(await metric('forge_upstream_requests_total', { resource: 'core', status: '200' }), 3)
  t.equal(await metric('forge_upstream_requests_total', { resource: 'search', status: '200' }), 2)
  t.equal(await metric('forge_upstream_requests_total', { resource: 'core', status: '404' }), 1)
  t.equal(await metric('forge_upstream_requests_total', { resource: 'core', status: 'error' }), 1)
  t.equal(await metric('forge_upstream_request_duration_seconds_count', { resource: 'core' }), 5)
  t.equal(await metric('forge_upstream_request_duration_seconds_count', { resource: 'search' }), 2)
})

t.test('forge_upstream_request_duration_seconds is in seconds: a call the upstream answers after 200 ms is above 0.1', async (t) => {
  const { app, metric } = await buildAggregator(t)
  nock(API).get('/repos/octocat/hello').delay(200).reply(200, fixtures.repository, RESOURCE_HEADERS)
  t.equal((await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=hello' })).statusCode, 200)
  const bucket = (le: string) => metric('forge_upstream_request_duration_seconds_bucket', { resource: 'core', le })
  // In milliseconds it would be past every bucket; in microseconds, in the first.
  t.equal(await bucket('0.1'), 0, 'not under 0.1 s')
  t.equal(await bucket('2.5'), 1, 'under 2.5 s, the margin a loaded machine needs')
  const sum = Number(await metric('forge_upstream_request_duration_seconds_sum', { resource: 'core' }))
  t.ok(sum >= 0.2 && sum < 2.5, `200 ms is 0.2 s (${sum})`)
})

t.test('forge_ratelimit_remaining and forge_ratelimit_reset_timestamp_seconds follow the upstream headers', async (t) => {
  const { app, metric } = await buildAggregator(t)
  nock(API).get('/repos/octocat/hello').reply(200, fixtures.repository, { ...RESOURCE_HEADERS, 'x-ratelimit-remaining': '4321', 'x-ratelimit-reset': '1800000000' })
  await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=hello' })
  t.equal(await metric('forge_ratelimit_remaining', { resource: 'core' }), 4321)
  t.equal(await metric('forge_ratelimit_reset_timestamp_seconds', { resource: 'core' }), 1_800_000_000)
})

t.test('forge_ratelimit_limit follows the upstream’s limit header, forge_ratelimit_reserve_ratio is FORGE_BUDGET_RESERVE on core', async (t) => {
  const { app, metric } = await buildAggregator(t, { env: { FORGE_BUDGET_RESERVE: 0.25 } })
  t.equal(await metric('forge_ratelimit_reserve_ratio', { resource: 'core' }), 0.25, 'from the start')
  t.equal(await metric('forge_ratelimit_reserve_ratio', { resource: 'search' }), undefined, 'the reserve spares core calls only')
  t.equal(await metric('forge_ratelimit_limit', { resource: 'core' }), undefined, 'unknown before the first answer')
  nock(API).get('/repos/octocat/hello').reply(200, fixtures.repository, { ...RESOURCE_HEADERS, 'x-ratelimit-limit': '5000' })
  await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=hello' })
  t.equal(await metric('forge_ratelimit_limit', { resource: 'core' }), 5000)
})

t.test('a rate limit that names neither remaining nor reset leaves the gauges unset', async (t) => {
  const { app, metric } = await buildAggregator(t)
  nock(API).get('/repos/octocat/hello').reply(429, { message: 'slow down' }, { 'retry-after': '5' })
  await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=hello' })
  t.equal(await metric('forge_ratelimit_remaining', { resource: 'core' }), undefined)
  t.equal(await metric('forge_ratelimit_reset_timestamp_seconds', { resource: 'core' }), undefined)
  t.equal(await metric('forge_ratelimit_limit', { resource: 'core' }), undefined)
})

t.test('each app has its own registry: what one app counted is not on the other’s /metrics', async (t) => {
  const one = await buildAggregator(t)
  const two = await buildAggregator(t)
  nock(API).get('/repos/octocat/hello').reply(200, fixtures.repository, RESOURCE_HEADERS)
  await one.app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=hello' })
  t.equal(await one.metric('forge_upstream_requests_total', { resource: 'core', status: '200' }), 1)
  t.equal(await two.metric('forge_upstream_requests_total', { resource: 'core', status: '200' }), undefined)
  t.equal(await two.metric('forge_cache_results_total', { endpoint: 'repos', result: 'miss' }), 0)
})
