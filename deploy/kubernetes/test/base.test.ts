import t from 'tap'
import { execFile } from 'node:child_process'
import { once } from 'node:events'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createServer } from 'node:net'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { LISTENING, runServiceSource, startRedisWithServiceUsers } from '@repo/test-support'
import { dataTierProblems, environmentOf, podProblems, secretProblems, selects, serviceProblems, wiringProblems, workloadsOf, type Container } from '../src/checks.ts'
import { containersOf, renderKustomization, type KubernetesObject } from '../src/render.ts'
import { schemaProblems } from '../src/schemas.ts'
import { SERVICES } from '../src/services.ts'

// The base as `kubectl apply -k deploy/kubernetes` would send it.
const base = await renderKustomization(fileURLToPath(new URL('..', import.meta.url)))

const execFileText = promisify(execFile)

const workload = (name: string) => workloadsOf(base).find((each) => each.metadata.name === name)
const containerOf = (name: string) => workload(name)?.spec.template.spec.containers.find((each) => each.name === name) as Container

t.test('the base holds, per service, a ConfigMap, Deployment, Service, autoscaler and disruption budget; two Redis servers and their policies', async (t) => {
  t.same(base.map((object) => `${object.kind}/${object.metadata.name}`).sort(), [
    'ConfigMap/forge-aggregator',
    'ConfigMap/items-list',
    'Deployment/forge-aggregator',
    'Deployment/items-list',
    'Deployment/redis-cache',
    'HorizontalPodAutoscaler/forge-aggregator',
    'HorizontalPodAutoscaler/items-list',
    'NetworkPolicy/redis',
    'NetworkPolicy/redis-cache',
    'PodDisruptionBudget/forge-aggregator',
    'PodDisruptionBudget/items-list',
    'Service/forge-aggregator',
    'Service/items-list',
    'Service/redis',
    'Service/redis-cache',
    'Service/redis-headless',
    'StatefulSet/redis',
  ])
})

t.test('every object is valid against the Kubernetes OpenAPI schema of its kind', async (t) => {
  t.same(await schemaProblems(base), [])
})

t.test('selectors select the pods they are meant to, autoscalers scale workloads that exist', async (t) => {
  t.same(wiringProblems(base), [])
})

t.test('every pod, Redis included, meets the restricted Pod Security Standard, with limits and probes', async (t) => {
  t.same(podProblems(base), [])
})

t.test('each service gets only settings it reads, with values it accepts, probed and scraped on its port', async (t) => {
  t.same(serviceProblems(base, SERVICES), [])
})

t.test('no credential is written in the base; the token, or the GitHub App, comes from an optional Secret, the Redis password from a required one', async (t) => {
  t.same(secretProblems(base), [])
  const fromApp = (name: string) => ({ name, valueFrom: { secretKeyRef: { name: 'forge-aggregator-app', key: name, optional: true } } })
  const redisPassword = (service: string) => ({ name: 'REDIS_PASSWORD', valueFrom: { secretKeyRef: { name: `${service}-redis`, key: 'REDIS_PASSWORD' } } })
  t.same(containerOf('items-list').env, [redisPassword('items-list')])
  t.same(containerOf('forge-aggregator').env, [
    redisPassword('forge-aggregator'),
    { name: 'FORGE_TOKEN', valueFrom: { secretKeyRef: { name: 'forge-aggregator-token', key: 'FORGE_TOKEN', optional: true } } },
    fromApp('FORGE_APP_ID'),
    fromApp('FORGE_APP_INSTALLATION_ID'),
    fromApp('FORGE_APP_PRIVATE_KEY'),
    fromApp('FORGE_APP_PUBLIC'),
  ])
})

t.test('images are tagged by kustomize images: as docs/kubernetes.md (Apply) builds them, Redis pinned to a release line', async (t) => {
  t.same(base.flatMap(containersOf).map((container) => container.image), [
    'forge-aggregator:1.0.0',
    'items-list:1.0.0',
    'redis:7.4',
    'redis:7.4',
  ])
})

type RedisContainer = Container & { args: string[]; volumeMounts: { name: string; mountPath: string; readOnly?: boolean }[] }
const optionOf = (redis: RedisContainer) => (name: string) => redis.args[redis.args.indexOf(`--${name}`) + 1]

t.test('the data tier: each service’s Redis is configured for what it keeps there, and loads the ACL users from a Secret', async (t) => {
  t.same(dataTierProblems(base, SERVICES), [])
})

t.test('items-list’s Redis fsyncs every write to its append-only file on a volume and never evicts: full, it refuses writes', async (t) => {
  const redis = containerOf('redis') as RedisContainer
  const option = optionOf(redis)
  t.equal(redis.args[0], 'redis-server')
  t.equal(option('appendonly'), 'yes')
  t.equal(option('appendfsync'), 'always')
  t.equal(option('maxmemory-policy'), 'noeviction')
  t.match(option('maxmemory'), /^\d+mb$/)
  t.equal(option('dir'), '/data')
  const claims = workload('redis')?.spec.volumeClaimTemplates ?? []
  const [mount] = redis.volumeMounts
  t.same(mount, { name: 'data', mountPath: '/data' })
  t.ok(claims.some((claim) => claim.metadata.name === mount?.name), 'the data is on a PersistentVolumeClaim')
  t.equal(environmentOf(containerOf('items-list'), base).values.REDIS_URL, 'redis://redis:6379')
})

t.test('the aggregator’s cache Redis writes nothing to disk and evicts the least recently used entry when full', async (t) => {
  const redis = containerOf('redis-cache') as RedisContainer
  const option = optionOf(redis)
  t.equal(redis.args[0], 'redis-server')
  t.equal(option('save'), '')
  t.equal(option('appendonly'), 'no')
  t.equal(option('maxmemory-policy'), 'allkeys-lru')
  t.match(option('maxmemory'), /^\d+mb$/)
  t.notOk(workload('redis-cache')?.spec.volumeClaimTemplates, 'no volume for data')
  t.equal(environmentOf(containerOf('forge-aggregator'), base).values.REDIS_URL, 'redis://redis-cache:6379')
})

t.test('both Redis servers load users.acl from the Secret redis-users, read-only, and the base holds no password', async (t) => {
  for (const name of ['redis', 'redis-cache']) {
    const redis = containerOf(name) as RedisContainer
    t.equal(optionOf(redis)('aclfile'), '/etc/redis/acl/users.acl', name)
    t.same(redis.volumeMounts.find((mount) => mount.name === 'users'), { name: 'users', mountPath: '/etc/redis/acl', readOnly: true }, name)
    t.match(workload(name)?.spec.template.spec.volumes, [{ name: 'users', secret: { secretName: 'redis-users' } }], name)
  }
  t.same(
    Object.keys(SERVICES).map((name) => environmentOf(containerOf(name), base).values.REDIS_USERNAME),
    ['forge-aggregator', 'items-list'],
    'each service logs in as its own user of deploy/redis/users.acl.template',
  )
})

t.test('each Redis is ready by its probe under the ACL file, where a client that has not logged in gets nothing', async (t) => {
  const redis = await startRedisWithServiceUsers({ durable: false })
  t.teardown(() => redis.dispose())
  // The probe runs in the pod, where redis-cli's default address is Redis's own: here a redis-cli
  // first on PATH sends it to the test's.
  const shim = await mkdtemp(join(tmpdir(), 'probe-'))
  t.teardown(() => rm(shim, { recursive: true, force: true }))
  const { stdout: realCli } = await execFileText('sh', ['-c', 'command -v redis-cli'])
  await writeFile(join(shim, 'redis-cli'), `#!/bin/sh\nexec ${realCli.trim()} -p ${redis.port} "$@"\n`, { mode: 0o755 })
  const inPod = (script: string) => execFileText('sh', ['-c', script], { env: { PATH: `${shim}:${process.env.PATH}` } })
  for (const name of ['redis', 'redis-cache']) {
    const [shell, flag, script] = containerOf(name).readinessProbe?.exec?.command ?? []
    t.same([shell, flag], ['sh', '-c'], name)
    await t.resolves(inPod(script!), `${name}: the readiness probe passes`)
  }
  await t.rejects(inPod('redis-cli ping | grep -q PONG'), 'a bare `redis-cli ping` is refused')
})

t.test('only items-list may reach its Redis, only the aggregator its cache', async (t) => {
  const policies = base.filter((object) => object.kind === 'NetworkPolicy') as (KubernetesObject & {
    spec: { podSelector: Parameters<typeof selects>[0]; policyTypes: string[]; ingress: { from: { podSelector: Parameters<typeof selects>[0] }[] }[] }
  })[]
  const reaching = { redis: 'items-list', 'redis-cache': 'forge-aggregator' } as Record<string, string>
  for (const policy of policies) {
    t.same(policy.spec.policyTypes, ['Ingress'])
    const admitted = (labels: Record<string, string>) => policy.spec.ingress.some((rule) => rule.from.some((peer) => selects(peer.podSelector, labels)))
    for (const each of workloadsOf(base)) {
      const labels = each.spec.template.metadata.labels
      t.equal(selects(policy.spec.podSelector, labels), each.metadata.name === policy.metadata.name, `${policy.metadata.name} guards ${each.metadata.name}?`)
      t.equal(admitted(labels), each.metadata.name === reaching[policy.metadata.name], `${policy.metadata.name} admits ${each.metadata.name}?`)
    }
    t.equal(admitted({ 'app.kubernetes.io/name': 'anything-else' }), false, 'another pod of the namespace')
  }
  t.same(policies.map((policy) => policy.metadata.name), ['redis', 'redis-cache'])
})

/** A port nothing listens on: the services' Redis, so that no test touches a real one. */
async function closedPort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as { port: number }
  server.close()
  await once(server, 'close')
  return port
}

for (const name of Object.keys(SERVICES)) {
  t.test(`${name}, started with the settings of its pods, serves the paths it is probed and scraped on`, async (t) => {
    const container = containerOf(name)
    const annotations = workload(name)?.spec.template.metadata.annotations ?? {}
    const { values } = environmentOf(container, base)
    const root = fileURLToPath(new URL(`../../../services/${name}/`, import.meta.url))
    // Its own port and address, a Redis that is down (the paths must exist all the same), and a
    // stop without the drain's delay.
    const service = runServiceSource(root, { ...values, HOST: '127.0.0.1', PORT: '0', SHUTDOWN_DELAY_SECONDS: '0', REDIS_URL: `redis://127.0.0.1:${await closedPort()}` })
    t.teardown(async () => {
      service.child.kill('SIGTERM')
      await service.exited
    })
    const [, port] = await service.waitFor(LISTENING)
    const status = async (path: string | undefined) => (await fetch(`http://127.0.0.1:${port}${path}`)).status

    t.equal(await status(container.startupProbe?.httpGet?.path), 200, 'startup probe')
    t.equal(await status(container.livenessProbe?.httpGet?.path), 200, 'liveness probe')
    // Ready or, with its Redis down, not ready: the answers of a readiness route, never a 404.
    t.ok([200, 503].includes(await status(container.readinessProbe?.httpGet?.path)), 'readiness probe')
    t.equal(await status(annotations['prometheus.io/path']), 200, 'Prometheus scrape')
  })
}

t.test('the webhook secret is a file from an optional Secret, mounted read-only; webhooks stay off until it is asked for', async (t) => {
  const aggregator = containerOf('forge-aggregator') as Container & { volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[] }
  t.same(aggregator.volumeMounts, [{ name: 'webhook-secret', mountPath: '/run/secrets/forge-webhook', readOnly: true }])
  t.same(workload('forge-aggregator')?.spec.template.spec.volumes, [{ name: 'webhook-secret', secret: { secretName: 'forge-aggregator-webhook', optional: true } }])
  const config = base.find((object) => object.kind === 'ConfigMap' && object.metadata.name === 'forge-aggregator') as KubernetesObject & { data: Record<string, string> }
  t.notOk('FORGE_WEBHOOK_SECRET_FILE' in config.data, 'without the Secret a missing file would stop the start')
  t.notOk(JSON.stringify(aggregator.env ?? []).includes('FORGE_WEBHOOK_SECRET'), 'never an environment variable')
})
