import { spawnSync, type SpawnSyncReturns } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { runProcess, type RunningProcess } from '@repo/test-support'

/** The file docker compose mounts into its HAProxy container. */
export const COMPOSE_CONFIG_PATH = fileURLToPath(new URL('../haproxy.cfg', import.meta.url))

/** Debian's `haproxy` package. */
const HAPROXY = 'haproxy'
/** Where to look for it: Debian installs it in /usr/sbin, which is not on a user's PATH. */
const SEARCH_PATH = [process.env.PATH, '/usr/local/sbin', '/usr/sbin'].join(':')
/**
 * How long one `haproxy -v` or `haproxy -c` may take. Either takes milliseconds alone, but on a
 * machine whose cores are all taken a run came back killed (status null); a minute is far past
 * any wait for a turn on a core, and still ends a haproxy that hangs.
 */
const HAPROXY_RUN_TIMEOUT_MS = 60_000

/**
 * Why the HAProxy tests cannot run on this machine (the reason to skip them), or `false` when
 * they can. In CI (`CI=true`) `.ci/run` installs HAProxy, and a missing one is an error.
 */
export function whyNoHaproxy(command = HAPROXY): string | false {
  const probe = spawnSync(command, ['-v'], { env: { PATH: SEARCH_PATH }, timeout: HAPROXY_RUN_TIMEOUT_MS, killSignal: 'SIGKILL' })
  if (probe.status === 0) return false
  // A haproxy that is there but did not answer is not a reason to skip: the tests must fail.
  if (probe.error === undefined || (probe.error as NodeJS.ErrnoException).code !== 'ENOENT') {
    throw new Error(`${command} -v did not succeed: ${describeRun(probe, HAPROXY_RUN_TIMEOUT_MS)}`)
  }
  const reason = `no HAProxy here: no ${command} on PATH or in /usr/sbin (apt-get install haproxy)`
  if (process.env.CI === 'true') throw new Error(`${reason}, and CI requires it`)
  return reason
}

/**
 * What `haproxy -c` (or `command -c`) says of a configuration: its exit code and everything it
 * printed. Throws when it did not run to its end (not started, killed, still running after
 * `timeoutMs`), saying how it ended and what it printed, rather than answering a status of null.
 */
export function checkConfig(text: string, { command = HAPROXY, timeoutMs = HAPROXY_RUN_TIMEOUT_MS } = {}): { status: number; output: string } {
  const dir = mkdtempSync(join(tmpdir(), 'haproxy-check-'))
  try {
    const file = join(dir, 'haproxy.cfg')
    writeFileSync(file, text)
    const result = spawnSync(command, ['-c', '-f', file], { encoding: 'utf8', env: { PATH: SEARCH_PATH }, timeout: timeoutMs, killSignal: 'SIGKILL' })
    if (result.status === null) throw new Error(`${command} -c did not finish: ${describeRun(result, timeoutMs)}`)
    return { status: result.status, output: `${result.stdout}${result.stderr}` }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

/** How a run ended, for an error: past its deadline, its error, its signal or exit status, and what it printed. */
function describeRun(result: SpawnSyncReturns<string | Buffer>, timeoutMs: number): string {
  const error = result.error as NodeJS.ErrnoException | undefined
  const ending = [
    error?.code === 'ETIMEDOUT' ? `still running after ${timeoutMs} ms` : error?.message,
    result.signal ? `killed by ${result.signal}` : result.status === null ? undefined : `exit status ${result.status}`,
  ].filter((part) => part !== undefined)
  const output = `${String(result.stdout ?? '')}${String(result.stderr ?? '')}`.trim()
  return `${ending.join(', ')}; it printed: ${output === '' ? '(nothing)' : output}`
}

/** HAProxy in the foreground on `text`, its log on its output; the file is removed when it exits. */
export function startHaproxy(text: string): RunningProcess {
  const dir = mkdtempSync(join(tmpdir(), 'haproxy-'))
  const file = join(dir, 'haproxy.cfg')
  writeFileSync(file, text)
  const haproxy = runProcess(HAPROXY, ['-db', '-f', file], { cwd: dir, env: { PATH: SEARCH_PATH } })
  void haproxy.exited.finally(() => rmSync(dir, { recursive: true, force: true }))
  return haproxy
}

/** Where a local HAProxy listens and sends, for each of the compose file's services. */
export interface LocalTopology {
  /** The local port of each frontend (by service name). */
  frontends: Readonly<Record<string, number>>
  /** The local ports of each service's replicas (by service name). */
  replicas: Readonly<Record<string, readonly number[]>>
  /**
   * `http` as compose runs it; `tcp` for a balancer that pins each client connection to one
   * replica (kube-proxy), still taking replicas out when their /ready fails.
   */
  mode: 'http' | 'tcp'
  /** false: no retry and no redispatch, so that every failure reaches the client (docs/testing.md, "The rolling restart"). */
  retries: boolean
  /** A Unix socket for HAProxy's runtime API (`haproxyCommand`), as an orchestrator's controller would use. */
  adminSocket?: string
}

/**
 * The compose configuration turned into one for replicas on this machine: each `server-template`
 * becomes one `server` per local replica, each frontend binds a local port, and Docker's DNS is
 * left out; everything else (checks, timeouts) is the compose file's own. Every rewrite must
 * find what it rewrites, so that a change to the compose file cannot leave the tests on a
 * configuration of their own.
 */
export function localConfig(topology: LocalTopology, compose = readFileSync(COMPOSE_CONFIG_PATH, 'utf8')): string {
  let text = compose
  const rewrite = (pattern: RegExp, replacement: (...groups: string[]) => string) => {
    if (!pattern.test(text)) throw new Error(`the compose HAProxy configuration has no ${String(pattern)}`)
    text = text.replace(pattern, (_match, ...groups: string[]) => replacement(...groups))
  }
  rewrite(/^resolvers docker\n(?: {4}.*\n)+/m, () => '')
  rewrite(/ resolvers docker init-addr none$/m, () => '')
  for (const [service, port] of Object.entries(topology.frontends)) {
    rewrite(new RegExp(`^(frontend ${service}\\n {4}bind ):\\d+$`, 'm'), (head) => `${head}127.0.0.1:${port}`)
  }
  for (const [service, ports] of Object.entries(topology.replicas)) {
    rewrite(new RegExp(`^( {4})server-template ${service}- \\d+ ${service}:\\d+ (.*)$`, 'm'), (indent, options) =>
      ports.map((port, index) => `${indent}server ${service}-${index + 1} 127.0.0.1:${port} ${options}`).join('\n'),
    )
  }
  if (!topology.retries) {
    rewrite(/^( {4}retries )\d+$/m, (head) => `${head}0`)
    rewrite(/^ {4}option redispatch.*\n/m, () => '')
  }
  if (topology.mode === 'tcp') {
    rewrite(/^( {4}mode )http$/m, (head) => `${head}tcp`)
    rewrite(/^( {4}option )httplog$/m, (head) => `${head}tcplog`)
    // HTTP-only: a TCP balancer neither reads requests nor adds headers.
    rewrite(/^ {4}option forwardfor\n/m, () => '')
    rewrite(/^ {4}timeout http-request .*\n/m, () => '')
  }
  if (topology.adminSocket) {
    rewrite(/^(global\n)/m, (head) => `${head}    stats socket ${topology.adminSocket} level admin\n`)
  }
  return text
}

/** Sends one command to HAProxy's runtime API on `socket` and resolves with its answer. */
export async function haproxyCommand(socket: string, command: string): Promise<string> {
  const connection = connect(socket)
  let answer = ''
  connection.on('data', (chunk: Buffer) => (answer += chunk.toString()))
  connection.end(`${command}\n`)
  await once(connection, 'close')
  return answer
}
