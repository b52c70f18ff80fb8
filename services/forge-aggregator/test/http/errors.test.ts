import t from 'tap'
import nock from 'nock'
import { buildInMode, CREDENTIAL_MODES } from '../helpers/app-upstream.ts'
import { startLocalUpstream } from '../helpers/local-upstream.ts'
import { API, makeUser } from '../helpers/upstream.ts'

t.afterEach(() => {
  nock.cleanAll()
})

const endpoints = [
  { label: 'users', url: '/api/forge/users?user_name=mona', failure: 'Failed to fetch forge data' },
  { label: 'repos with repo_name', url: '/api/forge/repos?repo_name=hello', failure: 'Failed to fetch repository' },
  { label: 'repos without repo_name', url: '/api/forge/repos', failure: 'Failed to fetch repositories' },
]

/** Every upstream call of the request gets this answer. */
function upstreamAnswers(status: number, body: unknown, headers: Record<string, string> = {}) {
  nock(API).get(/.*/).query(true).reply(status, body as nock.Body, headers).persist()
}

for (const mode of CREDENTIAL_MODES) {
  for (const { label, url, failure } of endpoints) {
    t.test(`${mode.name}: ${label}: upstream 403 answers 403 with Retry-After from the upstream's Retry-After`, async (t) => {
      const { app } = await buildInMode(t, mode)
      upstreamAnswers(403, { message: 'You have exceeded a secondary rate limit.' }, { 'retry-after': '60' })
      const res = await app.inject({ method: 'GET', url })
      t.equal(res.statusCode, 403)
      t.same(res.json(), { error: 'API rate limit exceeded or access forbidden' })
      t.equal(res.headers['retry-after'], '60')
      t.equal(res.headers['cache-control'], 'no-store')
    })

    t.test(`${mode.name}: ${label}: upstream 429 answers 403 with Retry-After from X-RateLimit-Reset`, async (t) => {
      const { app, now } = await buildInMode(t, mode)
      const reset = Math.floor(now() / 1000) + 120
      upstreamAnswers(429, { message: 'API rate limit exceeded.' }, { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(reset) })
      const res = await app.inject({ method: 'GET', url })
      t.equal(res.statusCode, 403)
      t.equal(res.headers['retry-after'], '120')
    })

    t.test(`${mode.name}: ${label}: upstream 401 answers 500 ${failure} with the upstream message`, async (t) => {
      const { app } = await buildInMode(t, mode)
      upstreamAnswers(401, { message: 'Bad credentials', documentation_url: 'https://docs.github.com/rest' })
      const res = await app.inject({ method: 'GET', url })
      t.equal(res.statusCode, 500)
      t.same(res.json(), { error: failure, details: 'Upstream responded 401: Bad credentials' })
      t.equal(res.headers['cache-control'], 'no-store')
    })

    t.test(`${mode.name}: ${label}: an upstream 5xx that persists answers 500 ${failure}`, async (t) => {
      const { app } = await buildInMode(t, mode)
      upstreamAnswers(503, '<html><body>Unicorn!</body></html>', { 'content-type': 'text/html' })
      const res = await app.inject({ method: 'GET', url })
      t.equal(res.statusCode, 500)
      t.same(res.json(), { error: failure, details: 'Upstream responded 503: status 503' })
    })

    t.test(`${mode.name}: ${label}: an HTML body where JSON was expected answers 500 ${failure}`, async (t) => {
      const { app } = await buildInMode(t, mode)
      upstreamAnswers(200, '<!DOCTYPE html><html><title>Login</title></html>', { 'content-type': 'text/html' })
      const res = await app.inject({ method: 'GET', url })
      t.equal(res.statusCode, 500)
      t.same(res.json(), { error: failure, details: 'Upstream sent a body that is not valid JSON' })
    })

    t.test(`${mode.name}: ${label}: an upstream that does not answer within FORGE_TIMEOUT_MS answers 500 ${failure}`, async (t) => {
      const upstream = await startLocalUpstream(t, () => {
        // Never answers.
      })
      const { app } = await buildInMode(t, mode, { env: { FORGE_API_URL: upstream.url, FORGE_TIMEOUT_MS: 300 } })
      const started = Date.now()
      const res = await app.inject({ method: 'GET', url })
      t.equal(res.statusCode, 500)
      t.same(res.json(), { error: failure, details: 'Upstream did not answer within 300 ms' })
      t.ok(Date.now() - started < 2_000, 'the deadline holds')
    })

    t.test(`${mode.name}: ${label}: a body cut short answers 500 ${failure}`, async (t) => {
      const upstream = await startLocalUpstream(t, (_request, response) => {
        response.writeHead(200, { 'content-type': 'application/json', 'content-length': '5000' })
        response.write('{"login":"mona","public_repos":')
        response.socket?.destroy()
      })
      const { app } = await buildInMode(t, mode, { env: { FORGE_API_URL: upstream.url } })
      const res = await app.inject({ method: 'GET', url })
      t.equal(res.statusCode, 500)
      t.match(res.json(), { error: failure, details: /^Upstream request failed: / })
    })

    t.test(`${mode.name}: ${label}: a connection reset on every try answers 500 ${failure}`, async (t) => {
      const upstream = await startLocalUpstream(t, (request) => request.socket.destroy())
      const { app } = await buildInMode(t, mode, { env: { FORGE_API_URL: upstream.url } })
      const res = await app.inject({ method: 'GET', url })
      t.equal(res.statusCode, 500)
      t.match(res.json(), { error: failure, details: /^Upstream request failed: (ECONNRESET|UND_ERR_SOCKET)$/ })
    })

    t.test(`${mode.name}: ${label}: an unreachable upstream answers 500 ${failure}`, async (t) => {
      // Port 1 (tcpmux) is closed on any machine that runs these tests.
      const { app } = await buildInMode(t, mode, { env: { FORGE_API_URL: 'http://127.0.0.1:1' } })
      const res = await app.inject({ method: 'GET', url })
      t.equal(res.statusCode, 500)
      t.same(res.json(), { error: failure, details: 'Upstream request failed: ECONNREFUSED' })
    })
  }

  t.test(`${mode.name}: when two calls fail differently, a rate limit outranks a 404 of a call other than the profile`, async (t) => {
    const { app } = await buildInMode(t, mode)
    const scope = nock(API)
    scope.get('/users/mona').reply(200, makeUser('mona', { public_repos: 1 }))
    scope.get('/users/mona/repos').query(true).reply(404, { message: 'Not Found' })
    scope.get('/users/mona/followers').query(true).reply(429, { message: 'Too Many Requests' }, { 'retry-after': '17' })
    scope.get('/search/issues').query(true).times(2).reply(200, { total_count: 0, incomplete_results: false, items: [] })
    const res = await app.inject({ method: 'GET', url: '/api/forge/users?user_name=mona' })
    t.equal(res.statusCode, 403)
    t.same(res.json(), { error: 'API rate limit exceeded or access forbidden' })
    t.equal(res.headers['retry-after'], '17')
    scope.done()
  })

  t.test(`${mode.name}: a list endpoint answering something other than a list answers 500 with details`, async (t) => {
    const { app } = await buildInMode(t, mode)
    const scope = nock(API)
    scope.get('/users/mona').reply(200, makeUser('mona', { public_repos: 1 }))
    scope.get('/users/mona/repos').query(true).reply(200, { message: 'not a list' })
    scope.get('/users/mona/followers').query(true).reply(200, [])
    scope.get('/search/issues').query(true).times(2).reply(200, { total_count: 0, incomplete_results: false, items: [] })
    scope.get('/users/octocat/repos').query(true).reply(200, { message: 'not a list' })
    const users = await app.inject({ method: 'GET', url: '/api/forge/users?user_name=mona' })
    const list = await app.inject({ method: 'GET', url: '/api/forge/repos' })
    t.match(users.json(), { error: 'Failed to fetch forge data', details: /^Upstream sent an unexpected body \(\/: Expected array\)$/ })
    t.match(list.json(), { error: 'Failed to fetch repositories', details: /^Upstream sent an unexpected body/ })
  })

  t.test(`${mode.name}: a followers answer that is not a list answers 500 with details`, async (t) => {
    const { app } = await buildInMode(t, mode)
    const scope = nock(API)
    scope.get('/users/mona').reply(200, makeUser('mona', { public_repos: 1 }))
    scope.get('/users/mona/repos').query(true).reply(200, [])
    scope.get('/users/mona/followers').query(true).reply(200, {})
    scope.get('/search/issues').query(true).times(2).reply(200, { total_count: 0, incomplete_results: false, items: [] })
    const res = await app.inject({ method: 'GET', url: '/api/forge/users?user_name=mona' })
    t.match(res.json(), { error: 'Failed to fetch forge data', details: /^Upstream sent an unexpected body/ })
  })

  t.test(`${mode.name}: a profile without public_repos is the upstream’s fault: 500 Failed to fetch forge data, saying what is missing`, async (t) => {
    const { app } = await buildInMode(t, mode)
    const { public_repos: _dropped, ...profile } = makeUser('mona')
    const scope = nock(API)
    scope.get('/users/mona').reply(200, profile)
    scope.get('/users/mona/repos').query(true).reply(200, [])
    scope.get('/users/mona/followers').query(true).reply(200, [])
    scope.get('/search/issues').query(true).times(2).reply(200, { total_count: 0, incomplete_results: false, items: [] })
    const res = await app.inject({ method: 'GET', url: '/api/forge/users?user_name=mona' })
    t.equal(res.statusCode, 500)
    t.same(res.json(), { error: 'Failed to fetch forge data', details: "Upstream sent an unexpected body (/public_repos: Expected required property)" })
  })

  t.test(`${mode.name}: a repository whose counts are not numbers is the upstream’s fault: 500 Failed to fetch repository`, async (t) => {
    const { app } = await buildInMode(t, mode)
    nock(API).get('/repos/octocat/odd').reply(200, { stargazers_count: 'many', forks_count: 1, private: false })
    const res = await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=odd' })
    t.equal(res.statusCode, 500)
    t.match(res.json(), { error: 'Failed to fetch repository', details: /^Upstream sent an unexpected body \(\/stargazers_count: / })
  })

  t.test(`${mode.name}: a fault of our own answers 500 Internal server error and shows nothing of it`, async (t) => {
    // The clock is the one dependency a test may hand the app; one that throws is a bug of ours.
    let broken = false
    const clock = { now: () => (broken ? (undefined as unknown as { secret: number }).secret : Date.now()), advance: () => {} }
    const { app } = await buildInMode(t, mode, { clock })
    broken = true
    for (const url of ['/api/forge/users', '/api/forge/repos?repo_name=x', '/api/forge/repos']) {
      const res = await app.inject({ method: 'GET', url })
      t.equal(res.statusCode, 500, url)
      t.same(res.json(), { error: 'Internal server error', details: 'Unexpected error; the server log has the cause' }, url)
      t.notMatch(res.body, 'secret')
    }
  })
}
