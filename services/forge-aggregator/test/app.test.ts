import t from 'tap'
import { MockAgent } from 'undici'
import { buildAggregator } from './helpers/build.ts'
import { API, RESOURCE_HEADERS, fixtures } from './helpers/upstream.ts'

t.test('the upstream client builds on the dispatcher given to buildApp, and leaves it open when the app closes', async (t) => {
  const agent = new MockAgent()
  agent.disableNetConnect()
  t.teardown(() => agent.close())
  agent
    .get(API)
    .intercept({ path: '/repos/octocat/hello', method: 'GET' })
    .reply(200, JSON.stringify(fixtures.repository), { headers: RESOURCE_HEADERS })
  const { app } = await buildAggregator(t, { dispatcher: agent })
  const res = await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=hello' })
  t.equal(res.statusCode, 200)
  t.same(res.json(), { stars: fixtures.repository.stargazers_count, forksCount: fixtures.repository.forks_count })
  agent.assertNoPendingInterceptors()
  await app.close()
  agent.get(API).intercept({ path: '/after', method: 'GET' }).reply(200, '{}')
  const after = await agent.request({ origin: API, path: '/after', method: 'GET' })
  t.equal(after.statusCode, 200, 'the dispatcher is its owner’s to close: still open')
  await after.body.dump()
})

t.test('the app logs where its upstream is and whether it is authorized, never the token', async (t) => {
  const TOKEN = 'ghp_apptesttoken0000000000000000000000000'
  const { logs, logLines } = await buildAggregator(t, { env: { FORGE_TOKEN: TOKEN, FORGE_BUDGET_RESERVE: 0.25 } })
  t.match(logs().find((line) => line.msg === 'forge upstream'), { upstream: API, authenticated: true, budgetReserve: 0.25 })
  t.notMatch(logLines.join('\n'), TOKEN)
})
