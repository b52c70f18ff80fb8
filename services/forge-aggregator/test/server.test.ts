import t from 'tap'
import { generateKeyPairSync } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import { LISTENING, eventually, isListening, runServiceSource, startPrivateRedis } from '@repo/test-support'
import { startLocalUpstream } from './helpers/local-upstream.ts'
import { answerRepository, REPOSITORY_COUNTS as COUNTS } from './helpers/repository-upstream.ts'

const SERVICE_ROOT = fileURLToPath(new URL('..', import.meta.url))
// No drain delay: these tests are about what closing does (service-kit's test/process/drain-process.test.ts covers the drain).
const runServer = (env: Record<string, string>) => runServiceSource(SERVICE_ROOT, { SHUTDOWN_DELAY_SECONDS: '0', ...env })
const TOKEN = 'some-secret'

t.test('an invalid variable stops the process with exit code 1, one line per bad variable, and never prints the token', async (t) => {
  const server = runServer({ PORT: 'eighty', FORGE_TIMEOUT_MS: '5', FORGE_FOLLOWERS_LIMIT: '500', FORGE_TOKEN: TOKEN })
  t.equal(await server.exited, 1)
  t.equal(
    server.output().trim(),
    ['Invalid configuration:', '  PORT must be integer', '  FORGE_TIMEOUT_MS must be >= 100', '  FORGE_FOLLOWERS_LIMIT must be <= 100'].join('\n'),
  )
  t.notMatch(server.output(), TOKEN)
})

t.test('a GitHub App set mixed with FORGE_TOKEN, or partial, stops the process with exit code 1, naming the variables, never printing the key', async (t) => {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string
  const server = runServer({ FORGE_TOKEN: TOKEN, FORGE_APP_INSTALLATION_ID: '9001', FORGE_APP_PRIVATE_KEY: pem })
  t.equal(await server.exited, 1)
  t.equal(
    server.output().trim(),
    [
      'Invalid configuration:',
      '  FORGE_TOKEN must not be set with FORGE_APP_INSTALLATION_ID, FORGE_APP_PRIVATE_KEY: use a personal token or a GitHub App, not both',
      '  FORGE_APP_ID must be set with FORGE_APP_INSTALLATION_ID, FORGE_APP_PRIVATE_KEY: a GitHub App needs its id, its installation id and its private key',
    ].join('\n'),
  )
  t.notMatch(server.output(), TOKEN)
  t.notMatch(server.output(), pem.split('\n')[1]!)
})

t.test('FORGE_APP_PUBLIC=true without FORGE_APP_ID stops the process with exit code 1, naming the variable, never printing the key', async (t) => {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string
  const server = runServer({ FORGE_APP_PUBLIC: 'true', FORGE_APP_PRIVATE_KEY: pem })
  t.equal(await server.exited, 1)
  t.equal(
    server.output().trim(),
    ['Invalid configuration:', '  FORGE_APP_ID must be set with FORGE_APP_PUBLIC=true: a public GitHub App needs its id and its private key'].join('\n'),
  )
  t.notMatch(server.output(), pem.split('\n')[1]!)
})

t.test('with a token it says which upstream it calls, sends the token there only, never prints it, and answers stars and forks', async (t) => {
  const upstream = await startLocalUpstream(t, answerRepository('octocat'))
  const server = runServer({ HOST: '127.0.0.1', PORT: '0', FORGE_API_URL: upstream.url, FORGE_TOKEN: TOKEN })
  t.teardown(() => server.child.kill('SIGKILL'))
  const [, port] = await server.waitFor(LISTENING)

  const res = await fetch(`http://127.0.0.1:${port}/api/forge/repos?repo_name=hello-world`)
  t.equal(res.status, 200)
  t.same(await res.json(), COUNTS)
  t.same(
    upstream.requests.map((request) => [request.url, request.headers.authorization]),
    [['/repos/octocat/hello-world', `Bearer ${TOKEN}`]],
  )
  t.match(server.output(), `"upstream":"${upstream.url}","authenticated":true`)

  // A graceful stop, not the teardown's SIGKILL: only a process that exits writes its coverage.
  server.child.kill('SIGTERM')
  t.equal(await server.exited, 0)
  t.notMatch(server.output(), TOKEN)
})

t.test('SIGTERM: in-flight requests finish with their normal answers, new connections are refused, exit 0 within 10 s', async (t) => {
  // Answered only once the test has seen the server stop taking connections.
  const { promise: stopped, resolve: answerUpstream } = Promise.withResolvers<void>()
  const upstream = await startLocalUpstream(t, answerRepository('octocat', stopped))
  // No caching: every request is its own upstream call, still unanswered when SIGTERM comes.
  const server = runServer({ HOST: '127.0.0.1', PORT: '0', FORGE_API_URL: upstream.url, FORGE_CACHE_TTL_SECONDS: '0' })
  t.teardown(() => server.child.kill('SIGKILL'))
  const [, port] = await server.waitFor(LISTENING)

  const repos = ['hello-world', 'spoon-knife', 'linguist']
  const answers = repos.map(async (repo) => {
    try {
      const res = await fetch(`http://127.0.0.1:${port}/api/forge/repos?repo_name=${repo}`)
      return { status: res.status, body: await res.json(), at: Date.now() }
    } catch (error) {
      // Reported by the assertions below, not as an unhandled rejection while SIGTERM is sent.
      return { status: 0, body: String(error), at: Date.now() }
    }
  })
  t.ok(await eventually(async () => upstream.requests.length === repos.length), 'every request reached the upstream')

  const sentAt = Date.now()
  server.child.kill('SIGTERM')
  await server.waitFor(/"msg":"shutting down"/)
  t.ok(await connectionRefused(Number(port)), 'a new connection is refused')
  answerUpstream()

  for (const answer of await Promise.all(answers)) {
    t.equal(answer.status, 200, 'an in-flight request got its normal answer')
    t.same(answer.body, COUNTS)
    t.ok(answer.at > sentAt, 'after SIGTERM')
  }
  t.equal(await server.exited, 0)
  t.ok(Date.now() - sentAt < 10_000, 'exited within 10 s')
})

t.test('with REDIS_URL two processes share one cache: an answer one produced costs the other no upstream call', async (t) => {
  const redis = await startPrivateRedis()
  t.teardown(() => redis.dispose())
  const upstream = await startLocalUpstream(t, answerRepository('octocat'))
  const env = { HOST: '127.0.0.1', PORT: '0', FORGE_API_URL: upstream.url, REDIS_URL: `redis://127.0.0.1:${redis.port}` }
  const replicas = [runServer(env), runServer(env)]
  t.teardown(() => replicas.forEach((replica) => replica.child.kill('SIGKILL')))
  const ports = await Promise.all(replicas.map(async (replica) => (await replica.waitFor(LISTENING))[1]))
  await Promise.all(replicas.map((replica) => replica.waitFor(/"msg":"listening for production announcements"/)))

  for (const port of ports) {
    const res = await fetch(`http://127.0.0.1:${port}/api/forge/repos?repo_name=hello-world`)
    t.equal(res.status, 200)
    t.same(await res.json(), COUNTS)
  }
  t.equal(upstream.requests.length, 1, 'the second process answered from the shared cache')

  for (const replica of replicas) {
    replica.child.kill('SIGTERM')
    t.equal(await replica.exited, 0)
  }
})

/** Whether new connections are refused, once the listener has had a moment to close. */
function connectionRefused(port: number): Promise<boolean> {
  return eventually(async () => !(await isListening(port)), 40, 25)
}
