// The services' real Redis ACL users (deploy/redis) and compose's Redis flags, loaded into a test's
// private Redis, so that tests run with the rights production grants.
import { execFile } from 'node:child_process'
import { once } from 'node:events'
import { appendFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { parse } from 'yaml'
import { startPrivateRedis, type PrivateRedis, type PrivateRedisOptions } from './redis-server.ts'

/** deploy/redis: the ACL users' template and the script that renders it, as compose and Kubernetes use them. */
const REDIS_ACL_DIR = fileURLToPath(new URL('../../../deploy/redis/', import.meta.url))

/** The passwords the tests fill in; the services' users are named as in the template. */
export const TEST_REDIS_USERS = {
  itemsList: { username: 'items-list', password: 'items-list: a test password with spaces & slashes /' },
  forgeAggregator: { username: 'forge-aggregator', password: 'forge-aggregator test password' },
} as const

/**
 * A user of the tests' own, added after the real ones, to look at what the services did (ACL LOG,
 * keys of both services). Not in the template: production has no such user.
 */
export const TEST_REDIS_ADMIN = { username: 'test-admin', password: 'test-admin-password' } as const

/** The ACL file exactly as deploy/redis/render-acl.sh renders it with the tests' passwords. */
export async function renderServiceUsersAcl(): Promise<string> {
  const { stdout } = await promisify(execFile)('sh', [join(REDIS_ACL_DIR, 'render-acl.sh')], {
    env: { PATH: process.env.PATH, ITEMS_LIST_REDIS_PASSWORD: TEST_REDIS_USERS.itemsList.password, FORGE_AGGREGATOR_REDIS_PASSWORD: TEST_REDIS_USERS.forgeAggregator.password },
  })
  return stdout
}

/**
 * A private Redis that loads the services' real ACL users (`--aclfile`, as compose and the
 * Kubernetes base run Redis) with the tests' passwords, plus `TEST_REDIS_ADMIN`.
 */
export async function startRedisWithServiceUsers(options: PrivateRedisOptions = {}): Promise<PrivateRedis> {
  const dir = await mkdtemp(join(tmpdir(), 'redis-users-'))
  const file = join(dir, 'users.acl')
  await writeFile(file, await renderServiceUsersAcl())
  await appendFile(file, `user ${TEST_REDIS_ADMIN.username} on >${TEST_REDIS_ADMIN.password} ~* &* +@all\n`)
  const redis = await startPrivateRedis({ ...options, args: ['--aclfile', file, ...(options.args ?? [])] })
  const dispose = redis.dispose.bind(redis)
  redis.dispose = async () => {
    await dispose()
    await rm(dir, { recursive: true, force: true })
  }
  return redis
}

/**
 * The redis-server flags docker-compose.yml gives its service `service` (its `command`, without
 * `redis-server`), read from the file so that a test follows what compose runs.
 */
export async function composeRedisFlags(service: string): Promise<string[]> {
  const compose = parse(await readFile(fileURLToPath(new URL('../../../docker-compose.yml', import.meta.url)), 'utf8')) as {
    services: Record<string, { command?: string[] } | undefined>
  }
  const [program, ...flags] = compose.services[service]?.command ?? []
  if (program !== 'redis-server') throw new Error(`docker-compose.yml: ${service} does not run redis-server`)
  return flags
}

/**
 * Redis's first answer line to `command` (inline form: words separated by spaces) on a fresh
 * connection that has not logged in, as a client library would never send it: no handshake first.
 */
export async function answerWithoutLogin(port: number, command: string, host = '127.0.0.1'): Promise<string> {
  const socket = connect(port, host)
  try {
    socket.write(`${command}\r\n`)
    const [answer] = (await once(socket, 'data')) as [Buffer]
    return answer.toString().split('\r\n')[0]!
  } finally {
    socket.destroy()
  }
}
