// Where Redis is and how to reach it (one server or Sentinel, user, password, CA), turned into
// node-redis's options, with a bad CA file refused at start.
import { readFileSync } from 'node:fs'
import { ConfigError } from '@repo/config'

/**
 * Who connects, and whom it trusts: the same for every kind of target (`REDIS_USERNAME`,
 * `REDIS_PASSWORD`, `REDIS_CA_FILE`). A username or password written in a URL wins over these.
 * With Sentinel they are given to the data nodes (the primary and its replicas), not to the sentinels.
 */
export interface RedisAuth {
  /** The ACL user; `default` when only a password is given. */
  username?: string | undefined
  password?: string | undefined
  /** A PEM file of the CA that signed Redis's certificate (a private CA); only with TLS (`rediss://`). */
  caFile?: string | undefined
}

/** A primary found through Redis Sentinel (`REDIS_SENTINELS`, `REDIS_SENTINEL_NAME`), followed across failovers. */
export interface RedisSentinelTarget {
  sentinels: Array<{ host: string; port: number }>
  /** The name the sentinels monitor the primary under. */
  name: string
  database?: number
}

/** One Redis server: `REDIS_URL`, or its parts. */
export type RedisNodeTarget = ({ url: string } | { host: string; port: number; database?: number }) & RedisAuth

/** Where to connect: one server, or the sentinels that know the primary; with the credentials and CA of every kind. */
export type RedisTarget = RedisNodeTarget | (RedisSentinelTarget & RedisAuth)

/**
 * node-redis's client options for `target`: where, as whom, and whom to trust. Reads the CA file
 * now, so that a missing one stops the start rather than every connection: throws `ConfigError`
 * naming `REDIS_CA_FILE` when it cannot be read or is given without TLS (it would be silently ignored).
 */
export function clientOptions(target: RedisNodeTarget) {
  const tls = 'url' in target && new URL(target.url).protocol === 'rediss:'
  const trust = trustOf(target.caFile, tls)
  return {
    ...('url' in target ? { url: target.url, socket: trust } : { socket: { ...trust, host: target.host, port: target.port }, database: target.database ?? 0 }),
    ...asUser(target),
  }
}

/** node-redis's Sentinel options for `target`: the sentinels to ask, and the data nodes' database and user. */
export function sentinelOptions(target: RedisSentinelTarget & RedisAuth) {
  // TLS needs the URL form: a CA file here would be trusted by nothing.
  trustOf(target.caFile, false)
  return {
    name: target.name,
    sentinelRootNodes: target.sentinels,
    nodeClientOptions: { database: target.database ?? 0, ...asUser(target) },
  }
}

/** Where `target` is, for the logs: never a URL itself, which may hold a password. */
export function redactedTarget(target: RedisTarget): Record<string, unknown> {
  const user = target.username === undefined ? {} : { username: target.username }
  if ('sentinels' in target) {
    return { sentinels: target.sentinels.map(({ host, port }) => `${host}:${port}`), name: target.name, database: target.database ?? 0, ...user }
  }
  if (!('url' in target)) return { host: target.host, port: target.port, database: target.database ?? 0, ...user }
  const { protocol, host, pathname } = new URL(target.url)
  return { url: `${protocol}//${host}${pathname}`, ...user }
}

/** The ACL user given, asked nothing that user is not granted. */
function asUser(target: RedisAuth) {
  return {
    ...(target.username === undefined ? {} : { username: target.username }),
    ...(target.password === undefined ? {} : { password: target.password }),
    // CLIENT SETINFO only labels the connection, and Redis before 7.2 has no such command: the
    // services' ACL users are not given CLIENT (docs/design.md, *Redis ACLs and the
    // append-only file*), so every connection would log a denial.
    disableClientInfo: true,
  }
}

/** Node's own trust store unless a CA file is given; then that CA alone. */
function trustOf(caFile: string | undefined, tls: boolean): { tls?: true; ca?: string } {
  if (caFile === undefined) return {}
  if (!tls) throw new ConfigError(['REDIS_CA_FILE is set but the Redis connection is not TLS (a rediss:// REDIS_URL)'])
  try {
    return { tls: true, ca: readFileSync(caFile, 'utf8') }
  } catch (error) {
    // Every error readFileSync throws has a code (ENOENT, EACCES, EISDIR…); its message would show the path.
    throw new ConfigError([`REDIS_CA_FILE cannot be read (${String((error as NodeJS.ErrnoException).code)})`])
  }
}
