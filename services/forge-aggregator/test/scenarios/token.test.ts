import t from 'tap'
import nock from 'nock'
import { buildAggregator } from '../helpers/build.ts'
import { API, RESOURCE_HEADERS, makeRepos, makeUser } from '../helpers/upstream.ts'

const TOKEN = 'ghp_n3v3rSh0wMe000000000000000000000000000'

t.test('the token never appears in a response or a log line, whatever the upstream says', async (t) => {
  const { app, logs } = await buildAggregator(t, { env: { FORGE_TOKEN: TOKEN, FORGE_DEFAULT_USER: 'mona' } })
  const echo = { message: `Bad credentials for token ${TOKEN}` }
  const scope = nock(API, { reqheaders: { authorization: `Bearer ${TOKEN}` } })
  // users: the profile fails, echoing the token; the searches fail the same way.
  scope.get('/users/mona').reply(401, echo)
  scope.get('/users/mona/repos').query(true).reply(401, echo)
  scope.get('/users/mona/followers').query(true).reply(401, echo)
  scope.get('/search/issues').query(true).times(2).reply(403, echo)
  // repos: one repository, then the list after a failed /user.
  scope.get('/repos/mona/x').reply(500, echo)
  scope.get('/user').reply(401, echo)
  scope.get('/users/mona/repos').query({ sort: 'updated', per_page: '100' }).reply(503, echo).persist()

  const responses = [
    await app.inject({ method: 'GET', url: '/api/forge/users' }),
    await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=x' }),
    await app.inject({ method: 'GET', url: '/api/forge/repos' }),
  ]
  t.same(
    responses.map((res) => res.statusCode),
    [500, 500, 500],
  )
  for (const res of responses) {
    t.notMatch(res.body, TOKEN)
    t.notMatch(JSON.stringify(res.headers), TOKEN)
    t.match(res.json(), { details: /\[redacted\]|Upstream responded/ })
  }
  t.ok(logs.lines.length > 10, 'the service logged (at trace level, everything)')
  t.notMatch(logs.text(), TOKEN)
  nock.cleanAll()
})

t.test('a successful answer never carries the token either', async (t) => {
  const { app, logs } = await buildAggregator(t, { env: { FORGE_TOKEN: TOKEN } })
  const scope = nock(API, { reqheaders: { authorization: `Bearer ${TOKEN}` } })
  scope.get('/users/mona').reply(200, makeUser('mona', { public_repos: 1 }), RESOURCE_HEADERS)
  scope.get('/users/mona/repos').query(true).reply(200, makeRepos('mona', 1), RESOURCE_HEADERS)
  scope.get('/users/mona/followers').query(true).reply(200, [], RESOURCE_HEADERS)
  scope.get('/search/issues').query(true).times(2).reply(200, { total_count: 1, incomplete_results: false, items: [] })
  const res = await app.inject({ method: 'GET', url: '/api/forge/users?user_name=mona' })
  t.equal(res.statusCode, 200)
  t.notMatch(res.body + JSON.stringify(res.headers) + logs.text(), TOKEN)
  scope.done()
})
