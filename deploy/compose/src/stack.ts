import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { findFreePort } from '@repo/test-support'

const execFileText = promisify(execFile)

export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url))
const OVERRIDE = fileURLToPath(new URL('../compose.test.yml', import.meta.url))

export type ServiceName = 'forge-aggregator' | 'items-list'

/** What `docker inspect` says of a container, as far as the test reads it. */
export interface ContainerInfo {
  Id: string
  Name: string
  Config: { User: string; Env: string[]; Labels: Record<string, string> }
  State: { Status: string; ExitCode: number; Health?: { Status: string } }
  HostConfig: {
    ReadonlyRootfs: boolean
    CapDrop: string[] | null
    CapAdd: string[] | null
    SecurityOpt: string[] | null
    Memory: number
    Privileged: boolean
    Tmpfs: Record<string, string> | null
  }
  NetworkSettings: { Networks: Record<string, { IPAddress: string; Gateway: string }> }
}

/**
 * docker-compose.yml as an operator runs it, under a project name of the test's, with
 * compose.test.yml on top (the fake upstream, free ports) and secrets made for this run. Its
 * commands fail with what Docker said.
 */
export interface Stack {
  readonly project: string
  /** What `.env` would hold: the Redis users' passwords and an upstream token, new each run. */
  readonly secrets: { ITEMS_LIST_REDIS_PASSWORD: string; FORGE_AGGREGATOR_REDIS_PASSWORD: string; FORGE_TOKEN: string }
  /** The owner `GET /api/forge/repos` answers for (FORGE_DEFAULT_USER). */
  readonly defaultUser: string
  /** HAProxy's published address for each service. */
  readonly urls: Readonly<Record<ServiceName, string>>
  /** `docker compose <args>` for this stack; resolves with its standard output. */
  compose(...args: string[]): Promise<string>
  /** `docker <args>`; resolves with its standard output. */
  docker(...args: string[]): Promise<string>
  /** The ids of a service's running containers (replicas), in the order compose numbers them. */
  containers(service: string): Promise<string[]>
  inspect(container: string): Promise<ContainerInfo>
  /** Everything a container wrote to stdout and stderr. */
  logs(container: string): Promise<string>
}

export async function defineStack(fakeUpstreamPort: number): Promise<Stack> {
  const project = 'forge-items-compose-test'
  const secret = () => randomBytes(24).toString('hex')
  const secrets = { ITEMS_LIST_REDIS_PASSWORD: secret(), FORGE_AGGREGATOR_REDIS_PASSWORD: secret(), FORGE_TOKEN: `ghp_${secret()}` }
  const defaultUser = 'compose-owner'
  const ports = { 'forge-aggregator': await findFreePort(), 'items-list': await findFreePort() }
  const env = {
    ...process.env,
    ...secrets,
    FORGE_DEFAULT_USER: defaultUser,
    FAKE_UPSTREAM_PORT: String(fakeUpstreamPort),
    AGGREGATOR_PORT: String(ports['forge-aggregator']),
    ITEMS_LIST_PORT: String(ports['items-list']),
  }
  const docker = async (...args: string[]) => (await execFileText('docker', args, { cwd: REPO_ROOT, env, maxBuffer: 256 * 1024 * 1024 })).stdout
  const compose = (...args: string[]) => docker('compose', '--project-name', project, '--file', 'docker-compose.yml', '--file', OVERRIDE, ...args)
  const inspect = async (container: string) => {
    const [info] = JSON.parse(await docker('inspect', container)) as [ContainerInfo]
    return info
  }
  return {
    project,
    secrets,
    defaultUser,
    urls: { 'forge-aggregator': `http://127.0.0.1:${ports['forge-aggregator']}`, 'items-list': `http://127.0.0.1:${ports['items-list']}` },
    compose,
    docker,
    async containers(service) {
      const ids = (await compose('ps', '--quiet', service)).split('\n').filter(Boolean)
      const numbered = await Promise.all(ids.map(async (id) => ({ id, number: Number((await inspect(id)).Config.Labels['com.docker.compose.container-number']) })))
      return numbered.sort((a, b) => a.number - b.number).map(({ id }) => id)
    },
    inspect,
    async logs(container) {
      const { stdout, stderr } = await execFileText('docker', ['logs', container], { env, maxBuffer: 256 * 1024 * 1024 })
      return stdout + stderr
    },
  }
}
