import Fastify, { type FastifyInstance } from 'fastify'
import t from 'tap'
import { MockAgent } from 'undici'
import { loadConfig } from '@repo/config'
import { eventually } from '@repo/test-support'
import { ForgeAggregatorConfig } from '../src/config.ts'
import { responseCache } from '../src/cache/response-cache-plugin.ts'
import { forge } from '../src/forge/plugin.ts'
import { buildAggregator } from './helpers/build.ts'
import { startLocalUpstream } from './helpers/local-upstream.ts'
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

t.test('closing the app closes the keep-alive connections its own upstream client opened', async (t) => {
  const upstream = await startLocalUpstream(t, (_request, response) => {
    response.setHeader('content-type', 'application/json')
    response.end(JSON.stringify(fixtures.repository))
  })
  // Node's server drops an idle connection after 5 s; here only the client may close it.
  upstream.server.keepAliveTimeout = 60_000
  const { app } = await buildAggregator(t, { env: { FORGE_API_URL: upstream.url } })
  const res = await app.inject({ method: 'GET', url: '/api/forge/repos?repo_name=hello' })
  t.equal(res.statusCode, 200)
  const connection = upstream.requests[0]!.socket
  t.notOk(connection.destroyed, 'kept alive after the answer')
  await app.close()
  // Left open, the connection would last the Agent's 30 s keep-alive; the wait is bounded at 5 s.
  t.ok(await eventually(async () => connection.destroyed), 'closed with the app')
})

t.test('the app logs where its upstream is and whether it is authorized, never the token', async (t) => {
  const TOKEN = 'ghp_apptesttoken0000000000000000000000000'
  const { logs } = await buildAggregator(t, { env: { FORGE_TOKEN: TOKEN, FORGE_BUDGET_RESERVE: 0.25 } })
  const line = logs.lines.find((line) => line.msg === 'forge upstream')
  t.match(line, { upstream: API, authenticated: true, budgetReserve: 0.25 })
  t.notOk(line && 'githubApp' in line, 'a token is no GitHub App')
  t.notMatch(logs.text(), TOKEN)
})

t.test('the app logs that it calls its upstream anonymously when given no credentials', async (t) => {
  const { logs } = await buildAggregator(t)
  t.match(logs.lines.find((line) => line.msg === 'forge upstream'), { upstream: API, authenticated: false })
})

t.test('the forge and the response cache refuse to start before the shared store, whose Redis their budget and cache share', async (t) => {
  const config = loadConfig(ForgeAggregatorConfig, { FORGE_API_URL: API })
  const now = () => Date.now()
  for (const [name, register] of [
    ['forge', (app: FastifyInstance) => app.register(forge, { config, credentials: { kind: 'anonymous' }, revalidationMaxBytes: 1024, heldForMs: 60_000, now })],
    ['response cache', (app: FastifyInstance) => app.register(responseCache, { config, answerBytes: 1024, now })],
  ] as const) {
    const app = Fastify()
    t.teardown(() => app.close())
    await t.rejects(async () => register(app), { code: 'FST_ERR_PLUGIN_DEPENDENCY_NOT_REGISTERED' }, name)
  }
})
