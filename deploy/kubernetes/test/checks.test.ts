import t from 'tap'
import { fileURLToPath } from 'node:url'
import { Type } from '@sinclair/typebox'
import {
  dataTierProblems,
  MEMORY_MARGIN,
  mebibytesOf,
  podProblems,
  secretProblems,
  selects,
  serviceProblems,
  wiringProblems,
  workloadsOf,
  type Container,
  type Workload,
} from '../src/checks.ts'
import { renderKustomization, type KubernetesObject } from '../src/render.ts'
import { schemaProblems } from '../src/schemas.ts'
import { SERVICES } from '../src/services.ts'

// Each check is shown to catch what it names: the base, broken in exactly one way, gets exactly
// the problems that way deserves on top of whatever the base itself gets.
const base = await renderKustomization(fileURLToPath(new URL('..', import.meta.url)))

type Check = (objects: KubernetesObject[]) => string[]

function newProblems(check: Check, edit: (objects: KubernetesObject[]) => void): string[] {
  const objects = structuredClone(base)
  edit(objects)
  const before = check(base)
  return check(objects).filter((problem) => !before.includes(problem))
}

const workload = (objects: KubernetesObject[], name: string): Workload => {
  const found = workloadsOf(objects).find((each) => each.metadata.name === name)
  if (!found) throw new Error(`no workload ${name}`)
  return found
}
const podOf = (objects: KubernetesObject[], name: string) => workload(objects, name).spec.template.spec
const containerOf = (objects: KubernetesObject[], name: string): Container => podOf(objects, name).containers[0] as Container
const objectOf = (objects: KubernetesObject[], kind: string, name: string): KubernetesObject => {
  const found = objects.find((each) => each.kind === kind && each.metadata.name === name)
  if (!found) throw new Error(`no ${kind}/${name}`)
  return found
}
const specOf = (objects: KubernetesObject[], kind: string, name: string) => objectOf(objects, kind, name).spec as Record<string, unknown>
const dataOf = (objects: KubernetesObject[], name: string) => objectOf(objects, 'ConfigMap', name).data as Record<string, string>

t.test('selectors: labels and the four expression operators, an empty selector selects nothing', async (t) => {
  const cases: [selector: Parameters<typeof selects>[0], labels: Record<string, string>, expected: boolean][] = [
    [{}, { a: '1' }, false],
    [{ matchLabels: { a: '1' } }, { a: '1', b: '2' }, true],
    [{ matchLabels: { a: '1' } }, { a: '2' }, false],
    [{ matchExpressions: [{ key: 'a', operator: 'In', values: ['1', '3'] }] }, { a: '1' }, true],
    [{ matchExpressions: [{ key: 'a', operator: 'In', values: ['1'] }] }, {}, false],
    [{ matchExpressions: [{ key: 'a', operator: 'In' }] }, { a: '1' }, false],
    [{ matchExpressions: [{ key: 'a', operator: 'NotIn', values: ['1'] }] }, { a: '2' }, true],
    [{ matchExpressions: [{ key: 'a', operator: 'NotIn', values: ['1'] }] }, {}, true],
    [{ matchExpressions: [{ key: 'a', operator: 'NotIn', values: ['1'] }] }, { a: '1' }, false],
    [{ matchExpressions: [{ key: 'a', operator: 'Exists' }] }, { a: 'x' }, true],
    [{ matchExpressions: [{ key: 'a', operator: 'Exists' }] }, {}, false],
    [{ matchExpressions: [{ key: 'a', operator: 'DoesNotExist' }] }, {}, true],
    [{ matchExpressions: [{ key: 'a', operator: 'DoesNotExist' }] }, { a: 'x' }, false],
  ]
  for (const [selector, labels, expected] of cases) t.equal(selects(selector, labels), expected, JSON.stringify([selector, labels]))
})

t.test('schemas: an unknown apiVersion or kind, and a field of the wrong type, are problems', async (t) => {
  const objects = structuredClone(base)
  objects.push({ apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w' } })
  objects.push({ apiVersion: 'v1', kind: 'Widget', metadata: { name: 'w' } })
  specOf(objects, 'HorizontalPodAutoscaler', 'items-list').minReplicas = 'two'
  const problems = await schemaProblems(objects)
  t.same(problems.slice(0, 1), ['HorizontalPodAutoscaler/items-list: data/spec/minReplicas must be integer'])
  t.same(problems.slice(1), ['Widget/w: no schema for example.com/v1 Widget', 'Widget/w: no schema for v1 Widget'])
})

t.test('wiring: a workload whose selector misses its own pods', async (t) => {
  const problems = newProblems(wiringProblems, (objects) => {
    workload(objects, 'items-list').spec.selector = { matchLabels: { 'app.kubernetes.io/name': 'other' } }
  })
  t.same(problems, ['Deployment/items-list: its selector does not select its own pods'])
})

t.test('wiring: a Service must select the pods of exactly one workload, on a port they have', async (t) => {
  t.same(
    newProblems(wiringProblems, (objects) => (specOf(objects, 'Service', 'items-list').selector = { 'app.kubernetes.io/name': 'nobody' })),
    ['Service/items-list: selects the pods of no workload'],
  )
  t.same(
    newProblems(wiringProblems, (objects) => (specOf(objects, 'Service', 'items-list').selector = { 'app.kubernetes.io/part-of': 'forge-items' })),
    ['Service/items-list: selects the pods of several workloads'],
  )
  t.same(
    newProblems(wiringProblems, (objects) => {
      const [port] = specOf(objects, 'Service', 'forge-aggregator').ports as [{ targetPort: number | string }]
      port.targetPort = 'metrics'
    }),
    ['Service/forge-aggregator: targetPort metrics is no port of Deployment/forge-aggregator'],
  )
  t.same(
    newProblems(wiringProblems, (objects) => {
      const [port] = specOf(objects, 'Service', 'forge-aggregator').ports as [{ targetPort: number | string }]
      port.targetPort = 3000
      podOf(objects, 'forge-aggregator').containers.unshift({ name: 'sidecar', image: 'sidecar' })
    }),
    [],
    'a port number matches the container port of that number, in whichever container',
  )
})

t.test('wiring: a disruption budget and a network policy must concern pods of the base', async (t) => {
  t.same(
    newProblems(wiringProblems, (objects) => (specOf(objects, 'PodDisruptionBudget', 'items-list').selector = { matchLabels: { app: 'x' } })),
    ['PodDisruptionBudget/items-list: selects no workload\'s pods'],
  )
  t.same(
    newProblems(wiringProblems, (objects) => (specOf(objects, 'NetworkPolicy', 'redis').podSelector = { matchLabels: { app: 'x' } })),
    ['NetworkPolicy/redis: applies to no workload\'s pods'],
  )
  t.same(
    newProblems(wiringProblems, (objects) => {
      specOf(objects, 'NetworkPolicy', 'redis').ingress = [
        { from: [{ podSelector: { matchLabels: { app: 'x' } } }, { namespaceSelector: {} }] },
        { ports: [{ port: 6379 }] },
      ]
    }),
    ['NetworkPolicy/redis: admits no workload\'s pods'],
  )
  t.same(newProblems(wiringProblems, (objects) => delete specOf(objects, 'NetworkPolicy', 'redis').ingress), [], 'a policy that admits nothing')
})

t.test('wiring: an autoscaler must scale a workload that leaves the count to it, from at least 2 pods', async (t) => {
  t.same(
    newProblems(wiringProblems, (objects) => ((specOf(objects, 'HorizontalPodAutoscaler', 'items-list').scaleTargetRef as { name: string }).name = 'gone')),
    ['HorizontalPodAutoscaler/items-list: scales Deployment/gone, which does not exist'],
  )
  t.same(
    newProblems(wiringProblems, (objects) => (workload(objects, 'items-list').spec.replicas = 2)),
    ['Deployment/items-list: sets replicas although HorizontalPodAutoscaler/items-list owns them'],
  )
  for (const edit of [(spec: Record<string, unknown>) => (spec.minReplicas = 1), (spec: Record<string, unknown>) => delete spec.minReplicas]) {
    t.same(
      newProblems(wiringProblems, (objects) => edit(specOf(objects, 'HorizontalPodAutoscaler', 'items-list'))),
      ['HorizontalPodAutoscaler/items-list: minReplicas 1 leaves a single pod to a disruption'],
    )
  }
})

t.test('wiring: a StatefulSet is governed by a headless Service', async (t) => {
  for (const serviceName of ['redis', 'missing']) {
    t.same(
      newProblems(wiringProblems, (objects) => (workload(objects, 'redis').spec.serviceName = serviceName)),
      [`StatefulSet/redis: serviceName ${serviceName} is no headless Service`],
    )
  }
})

t.test('pods: what the restricted Pod Security Standard forbids at pod level', async (t) => {
  t.same(newProblems(podProblems, (objects) => (podOf(objects, 'items-list').hostNetwork = true)), ['Deployment/items-list: shares a host namespace'])
  t.same(
    newProblems(podProblems, (objects) => (podOf(objects, 'redis').securityContext = { ...podOf(objects, 'redis').securityContext, sysctls: [{ name: 'a', value: '1' }] })),
    ['StatefulSet/redis: sets sysctls'],
  )
  t.same(
    newProblems(podProblems, (objects) => (podOf(objects, 'items-list').volumes = [{ name: 'host', hostPath: { path: '/' } }, { name: 'bare' }, { name: 'tmp', emptyDir: {} }])),
    ['Deployment/items-list: volume host is of a type restricted pods may not use', 'Deployment/items-list: volume bare is of a type restricted pods may not use'],
  )
  t.same(newProblems(podProblems, (objects) => (podOf(objects, 'redis').terminationGracePeriodSeconds = 10)), ['StatefulSet/redis: terminationGracePeriodSeconds is under 15'])
  t.same(newProblems(podProblems, (objects) => delete podOf(objects, 'redis').terminationGracePeriodSeconds), [], 'the default is 30 s')
})

t.test('pods: what the restricted Pod Security Standard and this project forbid in a container', async (t) => {
  const inRedis = (message: string) => [`StatefulSet/redis: container redis ${message}`]
  const edits: [edit: (container: Container) => void, expected: string[]][] = [
    [(c) => (c.securityContext = { ...c.securityContext, runAsNonRoot: false }), inRedis('may run as root (runAsNonRoot is not true)')],
    [(c) => (c.securityContext = { ...c.securityContext, runAsUser: 0 }), inRedis('runs as user 0')],
    [(c) => (c.securityContext = { ...c.securityContext, privileged: true }), inRedis('is privileged')],
    [(c) => (c.securityContext = { ...c.securityContext, allowPrivilegeEscalation: true }), inRedis('allows privilege escalation')],
    [(c) => (c.securityContext = { ...c.securityContext, capabilities: { drop: ['NET_RAW'] } }), inRedis('does not drop ALL capabilities')],
    [(c) => (c.securityContext = { ...c.securityContext, capabilities: { drop: ['ALL'], add: ['NET_ADMIN'] } }), inRedis('adds capabilities')],
    [(c) => (c.securityContext = { ...c.securityContext, capabilities: { drop: ['ALL'], add: ['NET_BIND_SERVICE'] } }), []],
    [(c) => (c.securityContext = { ...c.securityContext, seccompProfile: { type: 'Unconfined' } }), inRedis('has no RuntimeDefault seccomp profile')],
    [(c) => (c.securityContext = { ...c.securityContext, procMount: 'Unmasked' }), inRedis('unmasks /proc')],
    [(c) => (c.securityContext = { ...c.securityContext, procMount: 'Default' }), []],
    [(c) => (c.ports = [{ containerPort: 6379, hostPort: 6379 }]), inRedis('uses a host port')],
    [(c) => (c.securityContext = { ...c.securityContext, readOnlyRootFilesystem: false }), inRedis('has a writable root filesystem')],
    [(c) => delete c.readinessProbe, inRedis('has no readinessProbe')],
  ]
  for (const [edit, expected] of edits) {
    t.same(newProblems(podProblems, (objects) => edit(containerOf(objects, 'redis'))), expected, expected[0] ?? 'allowed')
  }
  t.same(
    newProblems(podProblems, (objects) => delete podOf(objects, 'redis').securityContext?.seccompProfile),
    inRedis('has no RuntimeDefault seccomp profile'),
    'the pod-level seccomp profile counts',
  )
})

t.test('pods: a container without requests or limits for cpu or memory is refused, each one missing named', async (t) => {
  const inRedis = (...messages: string[]) => messages.map((message) => `StatefulSet/redis: container redis has no resources.${message}`)
  for (const kind of ['requests', 'limits'] as const) {
    for (const resource of ['cpu', 'memory'] as const) {
      t.same(
        newProblems(podProblems, (objects) => delete containerOf(objects, 'redis').resources?.[kind]?.[resource]),
        inRedis(`${kind}.${resource}`),
        `${kind}.${resource} alone missing`,
      )
    }
  }
  t.same(newProblems(podProblems, (objects) => delete containerOf(objects, 'redis').resources?.limits), inRedis('limits.cpu', 'limits.memory'))
  t.same(
    newProblems(podProblems, (objects) => delete containerOf(objects, 'redis').resources),
    inRedis('requests.cpu', 'requests.memory', 'limits.cpu', 'limits.memory'),
  )
})

t.test('pods: init containers meet the same bar, without probes (Kubernetes refuses them there)', async (t) => {
  t.same(
    newProblems(podProblems, (objects) => {
      const { name: _name, startupProbe: _s, livenessProbe: _l, readinessProbe: _r, ...secured } = containerOf(objects, 'redis')
      podOf(objects, 'redis').initContainers = [{ ...secured, name: 'init', securityContext: { ...secured.securityContext, readOnlyRootFilesystem: false } }]
    }),
    ['StatefulSet/redis: container init has a writable root filesystem'],
  )
})

t.test('services: every setting is one the service reads, with a value it accepts', async (t) => {
  t.same(
    newProblems(
      (objects) => serviceProblems(objects, SERVICES),
      (objects) => (containerOf(objects, 'items-list').env = [{ name: 'NOPE', value: '1' }]),
    ),
    ['Deployment/items-list: NOPE is not a setting items-list reads'],
  )
  t.match(
    newProblems(
      (objects) => serviceProblems(objects, SERVICES),
      (objects) => (dataOf(objects, 'items-list').LOG_LEVEL = 'loud'),
    ),
    [/^Deployment\/items-list: items-list refuses its settings: LOG_LEVEL must be one of fatal, error/],
  )
  t.same(
    newProblems(
      (objects) => serviceProblems(objects, SERVICES),
      (objects) => (containerOf(objects, 'forge-aggregator').envFrom = [{ configMapRef: { name: 'gone' } }, { secretRef: { name: 'creds' } }]),
    ),
    ['Deployment/forge-aggregator: envFrom gone is no ConfigMap of the base', 'Deployment/forge-aggregator: envFrom Secret creds is no ConfigMap of the base'],
  )
  t.same(
    newProblems(
      (objects) => serviceProblems(objects, SERVICES),
      (objects) => {
        const container = containerOf(objects, 'items-list')
        delete container.envFrom
        container.env = [{ name: 'HOST', valueFrom: {} }]
      },
    ),
    ['Deployment/items-list: HOST takes its value from something other than a Secret'],
  )
})

t.test('services: a setting the service requires, without a default, must be set', async (t) => {
  const strict = { 'items-list': { config: Type.Object({ PORT: Type.Integer({ default: 8080 }), MUST: Type.String() }), shutdownSeconds: 8 } }
  t.ok(serviceProblems(base, strict).includes('Deployment/items-list: MUST is required and not set'))
  t.notOk(serviceProblems(base, strict).some((problem) => problem.includes('PORT is required')), 'not one with a default')
  const lenient = { 'items-list': { config: Type.Object({ LOG_LEVEL: Type.Optional(Type.String()) }), shutdownSeconds: 8 } }
  t.notOk(serviceProblems(base, lenient).some((problem) => problem.includes('is required')), 'nothing when nothing is required')
})

t.test('services: memory quantities are read in MiB, whatever their unit; other forms are not read', async (t) => {
  t.equal(mebibytesOf('512Mi'), 512)
  t.equal(mebibytesOf('1Gi'), 1024)
  t.equal(mebibytesOf('1.5Gi'), 1536)
  t.equal(mebibytesOf('524288Ki'), 512)
  t.equal(mebibytesOf('536870912'), 512)
  t.equal(mebibytesOf('1Ti'), 1024 * 1024)
  t.equal(mebibytesOf('500M'), 500e6 / 2 ** 20)
  t.equal(mebibytesOf('2G'), 2e9 / 2 ** 20)
  t.equal(mebibytesOf('1T'), 1e12 / 2 ** 20)
  t.equal(mebibytesOf('64000k'), 64e6 / 2 ** 20)
  for (const unread of ['', 'lots', '512 Mi', '512mi', '5e8', '-1Gi']) t.equal(mebibytesOf(unread), undefined, JSON.stringify(unread))
})

t.test('services: the memory limit holds what the service was measured to reach with its settings, with margin', async (t) => {
  const check = (objects: KubernetesObject[]) => serviceProblems(objects, SERVICES)
  const limits = (objects: KubernetesObject[]) => containerOf(objects, 'forge-aggregator').resources!.limits!
  const peakWith = (cacheMb: number) => Math.ceil(SERVICES['forge-aggregator']!.peakMemoryMiB!({ FORGE_CACHE_MAX_MB: cacheMb }))
  const peakAtDefault = peakWith(64)
  t.ok(mebibytesOf(limits(base).memory!)! >= MEMORY_MARGIN * peakAtDefault, 'the base holds the default setting')

  t.same(newProblems(check, (objects) => (limits(objects).memory = '384Mi')), [
    `Deployment/forge-aggregator: memory limit 384Mi is under ${MEMORY_MARGIN} × the ${peakAtDefault} MiB forge-aggregator reaches with its settings`,
  ])
  t.same(
    newProblems(check, (objects) => (dataOf(objects, 'forge-aggregator').FORGE_CACHE_MAX_MB = '256')),
    [`Deployment/forge-aggregator: memory limit 512Mi is under ${MEMORY_MARGIN} × the ${peakWith(256)} MiB forge-aggregator reaches with its settings`],
    'a larger cache needs a larger limit',
  )
  t.same(newProblems(check, (objects) => (limits(objects).memory = 'half a gig')), [
    'Deployment/forge-aggregator: memory limit half a gig is not a quantity this check reads (such as 512Mi)',
  ])
  t.same(newProblems(check, (objects) => (limits(objects).memory = '1Gi')), [], 'a larger limit is fine')
  t.same(newProblems(check, (objects) => delete limits(objects).memory), [], 'a missing limit is the pod check’s to name')
  const refused = newProblems(check, (objects) => (dataOf(objects, 'forge-aggregator').FORGE_CACHE_MAX_MB = 'lots'))
  t.ok(refused.includes('Deployment/forge-aggregator: forge-aggregator refuses its settings: FORGE_CACHE_MAX_MB must be integer'))
  t.notOk(refused.some((problem) => problem.includes('memory limit')), 'settings it refuses give no memory figure')
  t.same(newProblems(check, (objects) => (containerOf(objects, 'items-list').resources!.limits!.memory = '64Mi')), [], 'items-list has no measured figure to hold')
})

t.test('services: each service needs a Deployment with its container', async (t) => {
  t.same(serviceProblems(base, { other: SERVICES['items-list'] as (typeof SERVICES)[string] }), ['other: no Deployment with a container of that name'])
  t.same(
    newProblems(
      (objects) => serviceProblems(objects, SERVICES),
      (objects) => (containerOf(objects, 'items-list').name = 'renamed'),
    ),
    ['items-list: no Deployment with a container of that name'],
  )
})

t.test('services: service links are off (a Service named redis would set REDIS_PORT=tcp://…)', async (t) => {
  t.same(
    newProblems(
      (objects) => serviceProblems(objects, SERVICES),
      (objects) => delete podOf(objects, 'items-list').enableServiceLinks,
    ),
    ['Deployment/items-list: enableServiceLinks is not false'],
  )
})

t.test('services: probes and scraping go to the paths meant for them, on the port the service listens on', async (t) => {
  const check = (objects: KubernetesObject[]) => serviceProblems(objects, SERVICES)
  t.same(
    newProblems(check, (objects) => ((containerOf(objects, 'items-list').readinessProbe as { httpGet: { path: string } }).httpGet.path = '/health')),
    ['Deployment/items-list: probes /health where /ready is meant'],
  )
  t.same(newProblems(check, (objects) => delete containerOf(objects, 'items-list').startupProbe), ['Deployment/items-list: probes nothing where /health is meant'])
  t.same(
    newProblems(check, (objects) => ((containerOf(objects, 'items-list').livenessProbe as { httpGet: { port: number } }).httpGet.port = 9999)),
    ['Deployment/items-list: probes /health on a port items-list does not listen on'],
  )
  t.same(
    newProblems(check, (objects) => (dataOf(objects, 'items-list').PORT = '9000')),
    [
      'Deployment/items-list: probes /health on a port items-list does not listen on',
      'Deployment/items-list: probes /health on a port items-list does not listen on',
      'Deployment/items-list: probes /ready on a port items-list does not listen on',
      'Deployment/items-list: is scraped on a port it does not listen on',
    ],
    'PORT moves the probes and the scrape with it',
  )
  t.same(newProblems(check, (objects) => delete workload(objects, 'items-list').spec.template.metadata.annotations), [
    'Deployment/items-list: is not scraped on /metrics',
    'Deployment/items-list: is scraped on a port it does not listen on',
  ])
})

t.test('services: a drain of at least 5 s and no preStop pause, a grace period past the drain and the shutdown, updates that add pods first', async (t) => {
  const check = (objects: KubernetesObject[]) => serviceProblems(objects, SERVICES)
  t.same(
    newProblems(check, (objects) => (containerOf(objects, 'items-list').lifecycle = { preStop: { sleep: { seconds: 5 } } })),
    ['Deployment/items-list: has a preStop hook: the service drains by itself on SIGTERM (SHUTDOWN_DELAY_SECONDS)'],
  )
  t.same(newProblems(check, (objects) => (dataOf(objects, 'items-list').SHUTDOWN_DELAY_SECONDS = '4')), [
    'Deployment/items-list: SHUTDOWN_DELAY_SECONDS 4 stops accepting before proxies have stopped sending (under 5 s)',
  ])
  t.same(newProblems(check, (objects) => delete dataOf(objects, 'items-list').SHUTDOWN_DELAY_SECONDS), [], 'the default is 5 s')
  t.same(newProblems(check, (objects) => (podOf(objects, 'items-list').terminationGracePeriodSeconds = 13)), [
    'Deployment/items-list: terminationGracePeriodSeconds 13 ends the 5 s drain and 8 s shutdown early',
  ])
  t.same(
    newProblems(check, (objects) => (dataOf(objects, 'items-list').SHUTDOWN_DELAY_SECONDS = '12')),
    ['Deployment/items-list: terminationGracePeriodSeconds 20 ends the 12 s drain and 8 s shutdown early'],
    'a longer drain needs a longer grace period',
  )
  t.same(newProblems(check, (objects) => delete podOf(objects, 'items-list').terminationGracePeriodSeconds), [], 'the default is 30 s')
  const unavailable = ['Deployment/items-list: a rolling update may take pods away first (maxUnavailable is not 0)']
  t.same(newProblems(check, (objects) => (workload(objects, 'items-list').spec.strategy = { rollingUpdate: { maxUnavailable: 1 } })), unavailable)
  t.same(newProblems(check, (objects) => delete workload(objects, 'items-list').spec.strategy), unavailable)
})

t.test('secrets: no Secret, no secret-named setting, no URL with a password is written down', async (t) => {
  t.same(
    newProblems(secretProblems, (objects) => objects.push({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'token' }, stringData: { FORGE_TOKEN: 'x' } })),
    ['Secret/token: a Secret is written in the repository'],
  )
  t.same(newProblems(secretProblems, (objects) => (dataOf(objects, 'forge-aggregator').FORGE_TOKEN = 'ghp_x')), [
    'ConfigMap/forge-aggregator: FORGE_TOKEN is written in the repository',
  ])
  t.same(newProblems(secretProblems, (objects) => (containerOf(objects, 'items-list').env = [{ name: 'REDIS_PASSWORD', value: 'hunter2' }])), [
    'Deployment/items-list: REDIS_PASSWORD is written in the repository',
  ])
  t.same(newProblems(secretProblems, (objects) => (dataOf(objects, 'items-list').REDIS_URL = 'redis://:hunter2@redis:6379')), [
    'ConfigMap/items-list: REDIS_URL holds a URL with a password',
  ])
  t.same(newProblems(secretProblems, (objects) => (dataOf(objects, 'items-list').REDIS_URL = 'redis://reader@redis:6379')), [], 'a user name alone is no secret')
  t.same(newProblems(secretProblems, (objects) => delete objectOf(objects, 'ConfigMap', 'items-list').data), [], 'an empty ConfigMap')
})

const dataTier: Check = (objects) => dataTierProblems(objects, SERVICES)
const argsOf = (objects: KubernetesObject[], name: string) => containerOf(objects, name).args!
const setFlag = (objects: KubernetesObject[], name: string, flag: string, value: string) => {
  const args = argsOf(objects, name)
  args[args.indexOf(`--${flag}`) + 1] = value
}

t.test('data tier: each Redis is configured for the data its service keeps there', async (t) => {
  t.same(newProblems(dataTier, (objects) => setFlag(objects, 'redis', 'maxmemory-policy', 'volatile-lru')), [
    'StatefulSet/redis: holds items-list\'s durable data without --maxmemory-policy "noeviction"',
  ])
  t.same(newProblems(dataTier, (objects) => setFlag(objects, 'redis', 'appendfsync', 'everysec')), [
    'StatefulSet/redis: holds items-list\'s durable data without --appendfsync "always"',
  ])
  t.same(newProblems(dataTier, (objects) => setFlag(objects, 'redis-cache', 'appendonly', 'yes')), [
    'Deployment/redis-cache: holds forge-aggregator\'s cache data without --appendonly "no"',
  ])
  t.same(newProblems(dataTier, (objects) => argsOf(objects, 'redis-cache').splice(argsOf(objects, 'redis-cache').indexOf('--maxmemory'), 2)), [
    'Deployment/redis-cache: sets no --maxmemory',
  ])
  t.same(newProblems(dataTier, (objects) => argsOf(objects, 'redis-cache').push('--maxmemory')), ['Deployment/redis-cache: sets no --maxmemory'], 'a last flag without its value')
  t.same(
    newProblems(dataTier, (objects) => {
      const container = containerOf(objects, 'redis-cache')
      delete container.args
      delete container.volumeMounts
      delete podOf(objects, 'redis-cache').volumes
    }),
    [
      'Deployment/redis-cache: holds forge-aggregator\'s cache data without --save ""',
      'Deployment/redis-cache: holds forge-aggregator\'s cache data without --appendonly "no"',
      'Deployment/redis-cache: holds forge-aggregator\'s cache data without --maxmemory-policy "allkeys-lru"',
      'Deployment/redis-cache: sets no --maxmemory',
      'Deployment/redis-cache: loads no ACL file (--aclfile) from a Secret: every client would be the all-powerful default user',
    ],
    'the image’s defaults: no flag, no ACL file',
  )
})

t.test('data tier: the cache and the durable data never share one Redis', async (t) => {
  t.same(newProblems(dataTier, (objects) => (dataOf(objects, 'forge-aggregator').REDIS_URL = 'redis://redis:6379')), [
    'StatefulSet/redis: holds forge-aggregator\'s cache data without --save ""',
    'StatefulSet/redis: holds forge-aggregator\'s cache data without --appendonly "no"',
    'StatefulSet/redis: holds forge-aggregator\'s cache data without --maxmemory-policy "allkeys-lru"',
    'Deployment/items-list: keeps its durable data on StatefulSet/redis, beside the cache data',
  ])
  t.same(newProblems(dataTier, (objects) => (dataOf(objects, 'items-list').REDIS_URL = 'redis://redis.elsewhere.svc:6379')), [], 'a fully qualified name is the Service’s')
  t.same(newProblems(dataTier, (objects) => (dataOf(objects, 'items-list').REDIS_URL = 'rediss://managed.example:6380')), [
    'Deployment/items-list: its Redis, managed, is no Service of the base in front of a workload',
  ])
  t.same(
    newProblems(dataTier, (objects) => {
      delete dataOf(objects, 'items-list').REDIS_URL
      dataOf(objects, 'items-list').REDIS_HOST = 'redis-cache'
    }),
    [
      'Deployment/items-list: keeps its durable data on Deployment/redis-cache, beside the cache data',
      'Deployment/redis-cache: holds items-list\'s durable data without --appendonly "yes"',
      'Deployment/redis-cache: holds items-list\'s durable data without --appendfsync "always"',
      'Deployment/redis-cache: holds items-list\'s durable data without --maxmemory-policy "noeviction"',
    ],
    'REDIS_HOST, without REDIS_URL',
  )
  t.same(newProblems(dataTier, (objects) => delete dataOf(objects, 'items-list').REDIS_URL), [
    'Deployment/items-list: its Redis, localhost, is no Service of the base in front of a workload',
  ], 'neither: localhost')
})

t.test('data tier: every Redis loads its ACL users from a Secret; each service logs in as its own user with a password from a Secret', async (t) => {
  t.same(newProblems(dataTier, (objects) => argsOf(objects, 'redis').splice(argsOf(objects, 'redis').indexOf('--aclfile'), 2)), [
    'StatefulSet/redis: loads no ACL file (--aclfile) from a Secret: every client would be the all-powerful default user',
  ])
  t.same(
    newProblems(dataTier, (objects) => (podOf(objects, 'redis-cache').volumes = [{ name: 'users', configMap: { name: 'redis-users' } }])),
    ['Deployment/redis-cache: loads no ACL file (--aclfile) from a Secret: every client would be the all-powerful default user'],
    'a ConfigMap is no Secret',
  )
  t.same(newProblems(dataTier, (objects) => delete dataOf(objects, 'items-list').REDIS_USERNAME), [
    'Deployment/items-list: sets no REDIS_USERNAME: it would reach Redis as the default user',
  ])
  t.same(newProblems(dataTier, (objects) => (containerOf(objects, 'forge-aggregator').env = containerOf(objects, 'forge-aggregator').env!.filter((each) => each.name !== 'REDIS_PASSWORD'))), [
    'Deployment/forge-aggregator: takes no REDIS_PASSWORD from a Secret',
  ])
  t.same(newProblems(dataTier, (objects) => delete containerOf(objects, 'items-list').env), ['Deployment/items-list: takes no REDIS_PASSWORD from a Secret'])
  t.same(newProblems(dataTier, (objects) => objects.splice(objects.findIndex((object) => object.kind === 'Deployment' && object.metadata.name === 'items-list'), 1)), [], 'a missing Deployment is serviceProblems’ to name')
  t.same(dataTierProblems(base, { other: { config: Type.Object({}), shutdownSeconds: 8 } }), [], 'a service without Redis')
})
