import t from 'tap'
import nock from 'nock'
import { buildAggregator } from '../helpers/build.ts'
import { API, fixtures, recordUnexpectedCalls } from '../helpers/upstream.ts'

const { app } = await buildAggregator(t)

// Raw query strings, as a caller could send them.
const invalidUserNames = {
  'a parent-directory path': '../x',
  'a slash': 'a/b',
  'an encoded slash': 'a%2Fb',
  'a question mark': 'a%3Fb',
  'encoded dots': '%2e%2e',
  'double-encoded dots': '%252e%252e',
  '40 characters': 'a'.repeat(40),
  'an empty value': '',
  'a space': 'mona%20lisa',
  'an underscore': 'mona_lisa',
  'a dot': 'mona.lisa',
  'unicode': 'mon%C3%A4',
  'a repeated parameter': 'a&user_name=b',
}

const invalidRepoNames = {
  'a single dot': '.',
  'two dots': '..',
  'encoded dots': '%2e%2e',
  'a parent-directory path': '../etc',
  'a slash': 'a/b',
  'an encoded slash': 'a%2Fb',
  'a question mark': 'a%3Fb',
  'a hash': 'a%23b',
  '101 characters': 'a'.repeat(101),
  'an empty value': '',
  'a space': 'a%20b',
  'a repeated parameter': 'a&repo_name=b',
}

for (const [rule, value] of Object.entries(invalidUserNames)) {
  t.test(`user_name with ${rule} answers 400 Invalid user_name and calls no upstream`, async (t) => {
    const unexpected = recordUnexpectedCalls(t)
    const res = await app.inject({ method: 'GET', url: `/api/forge/users?user_name=${value}` })
    t.equal(res.statusCode, 400)
    t.same(res.json(), { error: 'Invalid user_name' })
    t.equal(res.headers['cache-control'], 'no-store')
    t.equal(res.headers['cache-status'], 'forge-aggregator; fwd=bypass')
    t.same(unexpected, [])
  })
}

for (const [rule, value] of Object.entries(invalidRepoNames)) {
  t.test(`repo_name with ${rule} answers 400 Invalid repo_name and calls no upstream`, async (t) => {
    const unexpected = recordUnexpectedCalls(t)
    const res = await app.inject({ method: 'GET', url: `/api/forge/repos?repo_name=${value}` })
    t.equal(res.statusCode, 400)
    t.same(res.json(), { error: 'Invalid repo_name' })
    t.equal(res.headers['cache-status'], 'forge-aggregator; fwd=bypass')
    t.same(unexpected, [])
  })
}

t.test('the longest valid names and their allowed characters reach the upstream as one path segment', async (t) => {
  const login = `A-${'b'.repeat(37)}`
  const repo = `.github_${'x'.repeat(88)}-1.0`
  const scope = nock(API).get(`/repos/octocat/${repo}`).reply(200, fixtures.repository)
  nock(API).get(`/users/${login}`).reply(404, { message: 'Not Found' })
  nock(API).get(`/users/${login}/repos`).query(true).reply(404, { message: 'Not Found' })
  nock(API).get(`/users/${login}/followers`).query(true).reply(404, { message: 'Not Found' })
  nock(API).get('/search/issues').query(true).times(2).reply(422, { message: 'Validation Failed' })

  t.equal((await app.inject({ method: 'GET', url: `/api/forge/repos?repo_name=${repo}` })).statusCode, 200)
  t.equal((await app.inject({ method: 'GET', url: `/api/forge/users?user_name=${login}` })).statusCode, 404)
  scope.done()
})

t.test('unknown query parameters are ignored', async (t) => {
  nock(API).get('/repos/octocat/Hello-World').reply(200, fixtures.repository)
  const res = await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=Hello-World&verbose=1' })
  t.equal(res.statusCode, 200)
})
