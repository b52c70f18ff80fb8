import { createHmac } from 'node:crypto'
import { once } from 'node:events'
import { readFile } from 'node:fs/promises'
import { createServer, type ServerResponse } from 'node:http'
import { fileURLToPath } from 'node:url'
import type { Test } from 'tap'
import { LISTENING, runServiceSource, startPrivateRedis } from '@repo/test-support'

/** The two services, by the name of their directory under services/. */
export type ServiceName = 'forge-aggregator' | 'items-list'

const root = (name: ServiceName) => fileURLToPath(new URL(`../../../../services/${name}/`, import.meta.url))

/** The aggregator's webhook secret: set, its webhook route and metrics exist (docs/webhooks.md). */
const WEBHOOK_SECRET = 'monitoring-test-secret'

/** GitHub's official examples, as the aggregator's own tests use them. */
async function fixture(name: string): Promise<unknown> {
  return JSON.parse(await readFile(new URL(`${name}.json`, new URL('test/fixtures/', `file://${root('forge-aggregator')}`)), 'utf8')) as unknown
}

/**
 * A local upstream that answers the aggregator's calls for `octocat` and its repository `hello`
 * with GitHub's examples and rate-limit headers, 404 for `gone` and 502 for `broken`: answers
 * of every kind the metrics label.
 */
async function startUpstream(t: Test): Promise<string> {
  const [user, repos, followers, repository, search] = await Promise.all(
    ['user', 'user-repos', 'followers', 'repository', 'search-issues'].map(fixture),
  )
  const reset = String(Math.floor(Date.now() / 1000) + 3600)
  const send = (response: ServerResponse, status: number, body: unknown, resource = 'core'): void => {
    response
      .writeHead(status, {
        'content-type': 'application/json; charset=utf-8',
        'x-ratelimit-limit': resource === 'core' ? '5000' : '30',
        'x-ratelimit-remaining': resource === 'core' ? '4321' : '29',
        'x-ratelimit-reset': reset,
        'x-ratelimit-resource': resource,
      })
      .end(JSON.stringify(body))
  }
  const server = createServer((request, response) => {
    const path = new URL(request.url ?? '/', 'http://localhost').pathname
    if (path === '/users/octocat') return send(response, 200, user)
    if (path === '/users/octocat/repos') return send(response, 200, repos)
    if (path === '/users/octocat/followers') return send(response, 200, followers)
    if (path === '/search/issues') return send(response, 200, search, 'search')
    if (path === '/repos/octocat/hello') return send(response, 200, repository)
    if (path === '/repos/octocat/broken') return send(response, 502, { message: 'Bad Gateway' })
    send(response, 404, { message: 'Not Found' })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => {
    server.closeAllConnections()
    server.close()
  })
  return `http://127.0.0.1:${(server.address() as { port: number }).port}`
}

/** Runs a service's `src/server.ts` (its real buildApp) until the end of `t`; resolves with its base URL. */
async function runService(t: Test, name: ServiceName, env: Record<string, string>): Promise<string> {
  const service = runServiceSource(root(name), { HOST: '127.0.0.1', PORT: '0', ...env })
  t.teardown(async () => {
    service.child.kill('SIGTERM')
    await service.exited
  })
  const [, port] = await service.waitFor(LISTENING)
  return `http://127.0.0.1:${port}`
}

/**
 * Both services started from their sources as `pnpm start` starts them, on a private Redis (and
 * the aggregator on a local upstream, with a webhook secret); each answers a few requests of every
 * kind (hits, misses, 404s, a 502, an unmatched route, an unsigned and a signed webhook delivery)
 * so that every labelled series exists, then is scraped.
 * Resolves with each service's `/metrics` page.
 */
export async function scrapeServices(t: Test): Promise<Record<ServiceName, string>> {
  const redis = await startPrivateRedis()
  t.teardown(() => redis.dispose())
  const redisUrl = `redis://127.0.0.1:${redis.port}`
  const [aggregator, items] = await Promise.all([
    startUpstream(t).then((upstream) => runService(t, 'forge-aggregator', { FORGE_API_URL: upstream, FORGE_DEFAULT_USER: 'octocat', REDIS_URL: redisUrl, FORGE_WEBHOOK_SECRET: WEBHOOK_SECRET })),
    runService(t, 'items-list', { REDIS_URL: redisUrl }),
  ])

  const paths = ['/api/forge/users?user_name=octocat', '/api/forge/users?user_name=octocat', '/api/forge/repos?repo_name=hello', '/api/forge/repos?repo_name=gone', '/api/forge/repos?repo_name=broken', '/nowhere']
  for (const path of paths) await fetch(`${aggregator}${path}`).then((response) => response.arrayBuffer())
  const ping = JSON.stringify({ zen: 'Keep it logically awesome.', hook_id: 1 })
  const signature = `sha256=${createHmac('sha256', WEBHOOK_SECRET).update(ping).digest('hex')}`
  const delivery = { 'content-type': 'application/json', 'x-github-event': 'ping', 'x-github-delivery': '72d3162e-cc78-11e3-81ab-4c9367dc0958' }
  for (const headers of [delivery, { ...delivery, 'x-hub-signature-256': signature }]) {
    await fetch(`${aggregator}/api/forge/webhooks`, { method: 'POST', headers, body: ping }).then((response) => response.arrayBuffer())
  }
  const json = { 'content-type': 'application/json' }
  await fetch(`${items}/items/`, { method: 'POST', headers: json, body: JSON.stringify({ name: 'apple' }) })
  await fetch(`${items}/items/`)
  await fetch(`${items}/items/apple`, { method: 'DELETE' })
  await fetch(`${items}/items/apple`, { method: 'DELETE' })

  const scrape = async (base: string) => (await fetch(`${base}/metrics`)).text()
  return { 'forge-aggregator': await scrape(aggregator), 'items-list': await scrape(items) }
}
