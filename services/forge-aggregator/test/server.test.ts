import t from 'tap'
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { connect } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { startLocalUpstream } from './helpers/local-upstream.ts'
import { answerRepository, REPOSITORY_COUNTS as COUNTS } from './helpers/repository-upstream.ts'

const SERVICE_ROOT = fileURLToPath(new URL('..', import.meta.url))
const LISTENING = /Server listening at http:\/\/127\.0\.0\.1:(\d+)/
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
  const upstream = await startLocalUpstream(t, answerRepository('octocat', 500))
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
  while (upstream.requests.length < repos.length) await sleep(10)

  const sentAt = Date.now()
  server.child.kill('SIGTERM')
  await server.waitFor(/"msg":"shutting down"/)
  t.ok(await connectionRefused(Number(port)), 'a new connection is refused')

  for (const answer of await Promise.all(answers)) {
    t.equal(answer.status, 200, 'an in-flight request got its normal answer')
    t.same(answer.body, COUNTS)
    t.ok(answer.at > sentAt, 'after SIGTERM')
  }
  t.equal(await server.exited, 0)
  t.ok(Date.now() - sentAt < 10_000, 'exited within 10 s')
})

interface ServerProcess {
  child: ChildProcess
  output(): string
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>
  exited: Promise<number | null>
}

/** Runs `src/server.ts` as `pnpm start` does, with exactly `env` (plus PATH). */
function runServer(env: Record<string, string>): ServerProcess {
  const child = spawn(process.execPath, ['--conditions=@repo/source', 'src/server.ts'], {
    cwd: SERVICE_ROOT,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  const listeners = new Set<() => void>()
  const append = (chunk: Buffer) => {
    output += chunk.toString()
    for (const listener of listeners) listener()
  }
  child.stdout?.on('data', append)
  child.stderr?.on('data', append)
  const exited = once(child, 'exit').then(([code]) => code as number | null)

  return {
    child,
    output: () => output,
    exited,
    waitFor(pattern, timeoutMs = 10_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const match = output.match(pattern)
          if (!match) return
          cleanup()
          resolve(match)
        }
        const timer = setTimeout(() => {
          cleanup()
          reject(new Error(`no ${String(pattern)} in output:\n${output}`))
        }, timeoutMs)
        const cleanup = () => {
          clearTimeout(timer)
          listeners.delete(check)
        }
        listeners.add(check)
        check()
      })
    },
  }
}

async function connectionRefused(port: number): Promise<boolean> {
  for (let attempt = 0; attempt < 40; attempt++) {
    const refused = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1')
      socket.once('connect', () => {
        socket.destroy()
        resolve(false)
      })
      socket.once('error', () => resolve(true))
    })
    if (refused) return true
    await sleep(25)
  }
  return false
}
