import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'

/**
 * The upstream the stack's aggregator calls in the compose test: GitHub's REST routes the
 * aggregator reads, answered with the official example bodies (the aggregator's own test
 * fixtures) for any login, with the upstream's rate-limit headers. It listens on every address
 * of the host, so that containers reach it through Docker's host gateway.
 */
export interface FakeGitHub {
  readonly port: number
  /** Every request received, in order: its path and query, and its Authorization header. */
  readonly requests: ReadonlyArray<{ url: string; authorization: string | undefined }>
  close(): Promise<void>
}

/** A login with this prefix gets its profile after `SLOW_PROFILE_MS`: an answer still in flight when its replica is told to stop. */
export const SLOW_LOGIN_PREFIX = 'slow-'
export const SLOW_PROFILE_MS = 8_000

const FIXTURES = new URL('../../../services/forge-aggregator/test/fixtures/', import.meta.url)
const FIXTURE_LOGIN = 'octocat'
const LOGIN = /^[A-Za-z0-9-]{1,39}$/

const fixture = (name: string): string => readFileSync(new URL(name, FIXTURES), 'utf8')
const bodies = {
  user: fixture('user.json'),
  repos: fixture('user-repos.json'),
  followers: fixture('followers.json'),
  search: fixture('search-issues.json'),
  repository: fixture('repository.json'),
}

export async function startFakeGitHub(): Promise<FakeGitHub> {
  const requests: Array<{ url: string; authorization: string | undefined }> = []
  const server = createServer((request, response) => {
    requests.push({ url: request.url ?? '', authorization: request.headers.authorization })
    answer(request, response).catch(() => response.destroy())
  })
  server.listen(0, '0.0.0.0')
  await once(server, 'listening')
  return {
    port: (server.address() as AddressInfo).port,
    requests,
    async close() {
      server.closeAllConnections()
      server.close()
      await once(server, 'close')
    },
  }
}

async function answer(request: IncomingMessage, response: ServerResponse): Promise<void> {
  const { pathname } = new URL(request.url ?? '/', 'http://upstream')
  const [, first, login = '', rest] = pathname.split('/')
  const send = (body: string | undefined, resource: 'core' | 'search' = 'core') => {
    const reset = String(Math.ceil(Date.now() / 1000) + 3600)
    response.writeHead(body === undefined ? 404 : 200, {
      'content-type': 'application/json; charset=utf-8',
      'x-ratelimit-limit': resource === 'core' ? '5000' : '30',
      'x-ratelimit-remaining': resource === 'core' ? '4999' : '29',
      'x-ratelimit-reset': reset,
      'x-ratelimit-resource': resource,
    })
    response.end(body ?? JSON.stringify({ message: 'Not Found' }))
  }
  if (first === 'search') return send(bodies.search, 'search')
  // Who owns the token: nobody the test asks about, so list mode reads the public list.
  if (first === 'user' && login === '') return send(bodies.user.replaceAll(FIXTURE_LOGIN, 'token-owner'))
  if (!LOGIN.test(login)) return send(undefined)
  const forLogin = (body: string) => body.replaceAll(FIXTURE_LOGIN, login)
  if (first === 'users' && rest === undefined) {
    if (login.startsWith(SLOW_LOGIN_PREFIX)) await sleep(SLOW_PROFILE_MS)
    return send(forLogin(bodies.user))
  }
  if (first === 'users' && rest === 'repos') return send(forLogin(bodies.repos))
  if (first === 'users' && rest === 'followers') return send(bodies.followers)
  if (first === 'repos' && rest !== undefined) return send(forLogin(bodies.repository))
  send(undefined)
}
