/**
 * pnpm --dir services/forge-aggregator bench:mixed-versions <other version's services/forge-aggregator>:
 * two versions of the service side by side on one Redis, as during a rolling update
 * (docs/design.md, "Rollouts and stored entries"). Each is asked in turn for the same accounts
 * of the fake upstream, round after round past a TTL of 1 s, so that each revalidates what the
 * other held. Reports every answer's status and Cache-Status by version, the answers that differ
 * from the first one for their account (the fake upstream never changes: 0 is right), and each
 * version's upstream calls by status (core 304s: the held entries the other wrote were reused).
 *
 * The other version is its sources, with dependencies that resolve: for `main`, for example,
 *   git archive main services/forge-aggregator | tar -x -C /tmp/main
 *   ln -s "$PWD/node_modules" /tmp/main/node_modules; ln -s "$PWD/packages" /tmp/main/packages
 *   ln -s "$PWD/services/forge-aggregator/node_modules" /tmp/main/services/forge-aggregator/node_modules
 * The exit code is 1 when an answer is not 200 or differs.
 */
import { resolve } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { Agent, request } from 'undici'
import { eventually, findFreePort, runServiceSource, startPrivateRedis, type PrivateRedis } from '@repo/test-support'
import { startServer, stopEveryServer } from './servers.ts'

const ACCOUNTS = 20
const ROUNDS = 8
const TTL_SECONDS = 1

const [other] = process.argv.slice(2)
if (other === undefined) {
  console.error('usage: bench:mixed-versions <path of the other version’s services/forge-aggregator>')
  process.exit(2)
}

const dispatcher = new Agent({ keepAliveTimeout: 30_000 })
const problems: string[] = []
let redis: PrivateRedis | undefined
try {
  const upstream = await startServer('fake upstream', 'bench/fake-upstream.ts', {}, '/users/ready')
  redis = await startPrivateRedis({ durable: false })
  const roots = { other: resolve(other), this: fileURLToPath(new URL('..', import.meta.url)) }
  const versions = await Promise.all(
    Object.entries(roots).map(async ([name, root]) => {
      const port = await findFreePort()
      const settings = { PORT: String(port), HOST: '127.0.0.1', SHUTDOWN_DELAY_SECONDS: '0', FORGE_API_URL: upstream.url, REDIS_URL: `redis://127.0.0.1:${redis!.port}`, FORGE_CACHE_TTL_SECONDS: String(TTL_SECONDS) }
      const started = runServiceSource(root, settings, 'src/server.ts', { discardStdout: true })
      const url = `http://127.0.0.1:${port}`
      if (!(await eventually(async () => (await fetch(`${url}/ready`).catch(() => undefined))?.ok === true, 400))) throw new Error(`${name} did not start:\n${started.output()}`)
      return { name, url, started }
    }),
  )
  const firstAnswer = new Map<string, string>()
  const answers = new Map<string, number>()
  let differing = 0
  for (let round = 0; round < ROUNDS; round++) {
    for (let index = 0; index < ACCOUNTS; index++) {
      const login = `mixed-${index}`
      // Each account alternates between the versions from one round to the next.
      const version = versions[(index + round) % versions.length]!
      const response = await request(`${version.url}/api/forge/users?user_name=${login}`, { dispatcher })
      const body = await response.body.text()
      const seen = `${version.name}: ${response.statusCode} ${String(response.headers['cache-status'])}`
      answers.set(seen, (answers.get(seen) ?? 0) + 1)
      if (response.statusCode !== 200) problems.push(`${seen} for ${login}`)
      if (!firstAnswer.has(login)) firstAnswer.set(login, body)
      else if (firstAnswer.get(login) !== body) differing++
    }
    await sleep(TTL_SECONDS * 1000 + 100)
  }
  console.log(`Two versions on one Redis: ${ACCOUNTS} accounts asked ${ROUNDS} times, alternating between them, ${TTL_SECONDS} s apart`)
  console.table(Object.fromEntries([...answers].map(([seen, count]) => [seen, { answers: count }])))
  console.log(`answers that differ from the first answer for their account: ${differing}\n`)
  if (differing > 0) problems.push(`${differing} answers differ`)
  const calls: Record<string, Record<string, number>> = {}
  for (const { name, url } of versions) {
    const page = await (await request(`${url}/metrics`, { dispatcher })).body.text()
    for (const [, resource, status, count] of page.matchAll(/^forge_upstream_requests_total\{resource="([^"]+)",status="([^"]+)"\} (\d+)$/gm)) {
      calls[name] = { ...calls[name], [`${resource} ${status}`]: Number(count) }
    }
  }
  console.log('Upstream calls by version')
  console.table(calls)
  for (const { started } of versions) started.child.kill('SIGKILL')
} catch (error) {
  problems.push(`benchmark aborted: ${error instanceof Error ? error.message : String(error)}`)
} finally {
  stopEveryServer()
  await redis?.dispose()
  await dispatcher.close()
}
if (problems.length > 0) {
  console.error(`\nPROBLEMS (exit 1):\n${problems.map((line) => `  - ${line}`).join('\n')}`)
  process.exitCode = 1
}
