import type { TObject } from '@sinclair/typebox'
import { type ConfigError, loadConfig } from '@repo/config'
import type { KubernetesObject } from './render.ts'

/**
 * What the OpenAPI schemas cannot tell: that the objects fit together, that every pod meets the
 * restricted Pod Security Standard, that the services are configured with settings they read and
 * probed on routes and ports they serve, and that no secret is written down. Each check returns
 * one line per problem, naming the object.
 */

type Labels = Record<string, string>

interface Selector {
  matchLabels?: Labels
  matchExpressions?: { key: string; operator: string; values?: string[] }[]
}

interface Probe {
  httpGet?: { path?: string; port: number | string }
  exec?: { command: string[] }
}

export interface Container {
  name: string
  image: string
  args?: string[]
  volumeMounts?: { name: string; mountPath: string }[]
  ports?: { name?: string; containerPort: number; hostPort?: number }[]
  env?: { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }[]
  envFrom?: { configMapRef?: { name: string }; secretRef?: { name: string } }[]
  startupProbe?: Probe
  livenessProbe?: Probe
  readinessProbe?: Probe
  lifecycle?: { preStop?: Record<string, unknown> }
  resources?: { requests?: Labels; limits?: Labels }
  securityContext?: SecurityContext
}

interface SecurityContext {
  runAsNonRoot?: boolean
  runAsUser?: number
  privileged?: boolean
  allowPrivilegeEscalation?: boolean
  readOnlyRootFilesystem?: boolean
  capabilities?: { add?: string[]; drop?: string[] }
  seccompProfile?: { type: string }
  procMount?: string
}

interface PodSpec {
  containers: Container[]
  initContainers?: Container[]
  volumes?: Record<string, unknown>[]
  hostNetwork?: boolean
  hostPID?: boolean
  hostIPC?: boolean
  enableServiceLinks?: boolean
  terminationGracePeriodSeconds?: number
  securityContext?: SecurityContext & { sysctls?: unknown[] }
}

export interface Workload extends KubernetesObject {
  kind: 'Deployment' | 'StatefulSet'
  spec: {
    replicas?: number
    serviceName?: string
    selector: Selector
    strategy?: { rollingUpdate?: { maxUnavailable?: number | string } }
    template: { metadata: { labels: Labels; annotations?: Labels }; spec: PodSpec }
    volumeClaimTemplates?: { metadata: { name: string } }[]
  }
}

const of = (object: KubernetesObject) => `${object.kind}/${object.metadata.name}`

export function workloadsOf(objects: readonly KubernetesObject[]): Workload[] {
  return objects.filter((object): object is Workload => object.kind === 'Deployment' || object.kind === 'StatefulSet')
}

/** Whether `selector` selects a pod labelled `labels` (an empty selector selects nothing here). */
export function selects(selector: Selector, labels: Labels): boolean {
  const { matchLabels = {}, matchExpressions = [] } = selector
  if (Object.keys(matchLabels).length === 0 && matchExpressions.length === 0) return false
  return (
    Object.entries(matchLabels).every(([key, value]) => labels[key] === value) &&
    matchExpressions.every(({ key, operator, values = [] }) => {
      const label = labels[key]
      if (operator === 'In') return label !== undefined && values.includes(label)
      if (operator === 'NotIn') return label === undefined || !values.includes(label)
      if (operator === 'Exists') return label !== undefined
      return label === undefined
    })
  )
}

/** Selectors select the pods they are meant to, references point at objects that exist. */
export function wiringProblems(objects: readonly KubernetesObject[]): string[] {
  const problems: string[] = []
  const workloads = workloadsOf(objects)
  const selected = (selector: Selector) => workloads.filter((workload) => selects(selector, workload.spec.template.metadata.labels))

  for (const workload of workloads) {
    if (!selects(workload.spec.selector, workload.spec.template.metadata.labels)) {
      problems.push(`${of(workload)}: its selector does not select its own pods`)
    }
  }
  for (const object of objects) {
    const spec = object.spec as Record<string, unknown>
    if (object.kind === 'Service') {
      const { selector, ports } = spec as { selector: Labels; ports: { targetPort: number | string }[] }
      const [target, ...others] = selected({ matchLabels: selector })
      if (!target || others.length > 0) {
        problems.push(`${of(object)}: selects the pods of ${others.length > 0 ? 'several workloads' : 'no workload'}`)
        continue
      }
      const containerPorts = target.spec.template.spec.containers.flatMap((container) => container.ports ?? [])
      for (const { targetPort } of ports) {
        if (!containerPorts.some((port) => port.name === targetPort || port.containerPort === targetPort)) {
          problems.push(`${of(object)}: targetPort ${targetPort} is no port of ${of(target)}`)
        }
      }
    }
    if (object.kind === 'PodDisruptionBudget' && selected(spec.selector as Selector).length === 0) {
      problems.push(`${of(object)}: selects no workload's pods`)
    }
    if (object.kind === 'NetworkPolicy') {
      const { podSelector, ingress = [] } = spec as { podSelector: Selector; ingress?: { from?: { podSelector?: Selector }[] }[] }
      if (selected(podSelector).length === 0) problems.push(`${of(object)}: applies to no workload's pods`)
      for (const peer of ingress.flatMap((rule) => rule.from ?? [])) {
        if (peer.podSelector && selected(peer.podSelector).length === 0) problems.push(`${of(object)}: admits no workload's pods`)
      }
    }
    if (object.kind === 'HorizontalPodAutoscaler') {
      const { scaleTargetRef, minReplicas = 1 } = spec as { scaleTargetRef: { kind: string; name: string }; minReplicas?: number }
      const target = workloads.find((workload) => workload.kind === scaleTargetRef.kind && workload.metadata.name === scaleTargetRef.name)
      if (!target) problems.push(`${of(object)}: scales ${scaleTargetRef.kind}/${scaleTargetRef.name}, which does not exist`)
      // Applying a count would undo the autoscaler's on every apply.
      else if (target.spec.replicas !== undefined) problems.push(`${of(target)}: sets replicas although ${of(object)} owns them`)
      if (minReplicas < 2) problems.push(`${of(object)}: minReplicas ${minReplicas} leaves a single pod to a disruption`)
    }
  }
  for (const workload of workloads.filter((each) => each.kind === 'StatefulSet')) {
    const governing = objects.find((object) => object.kind === 'Service' && object.metadata.name === workload.spec.serviceName)
    if ((governing?.spec as { clusterIP?: string } | undefined)?.clusterIP !== 'None') {
      problems.push(`${of(workload)}: serviceName ${workload.spec.serviceName} is no headless Service`)
    }
  }
  return problems
}

/** Volume types the restricted Pod Security Standard allows. */
const RESTRICTED_VOLUMES = new Set(['configMap', 'csi', 'downwardAPI', 'emptyDir', 'ephemeral', 'persistentVolumeClaim', 'projected', 'secret'])

/**
 * Every pod meets the restricted Pod Security Standard (kubernetes.io/docs/concepts/security/
 * pod-security-standards) and this project's bar on top: a read-only root filesystem, requests
 * and limits, the three probes, a grace period of at least 15 s.
 */
export function podProblems(objects: readonly KubernetesObject[]): string[] {
  const problems: string[] = []
  for (const workload of workloadsOf(objects)) {
    const pod = workload.spec.template.spec
    const problem = (message: string) => problems.push(`${of(workload)}: ${message}`)
    if (pod.hostNetwork || pod.hostPID || pod.hostIPC) problem('shares a host namespace')
    if (pod.securityContext?.sysctls?.length) problem('sets sysctls')
    for (const volume of pod.volumes ?? []) {
      const type = Object.keys(volume).find((key) => key !== 'name')
      if (!type || !RESTRICTED_VOLUMES.has(type)) problem(`volume ${String(volume.name)} is of a type restricted pods may not use`)
    }
    if ((pod.terminationGracePeriodSeconds ?? 30) < 15) problem('terminationGracePeriodSeconds is under 15')

    const initContainers = new Set(pod.initContainers)
    for (const container of [...pod.containers, ...initContainers]) {
      const inContainer = (message: string) => problem(`container ${container.name} ${message}`)
      const context = { ...pod.securityContext, ...container.securityContext }
      if (context.runAsNonRoot !== true) inContainer('may run as root (runAsNonRoot is not true)')
      if (context.runAsUser === 0) inContainer('runs as user 0')
      if (context.privileged) inContainer('is privileged')
      if (context.allowPrivilegeEscalation !== false) inContainer('allows privilege escalation')
      if (!context.capabilities?.drop?.includes('ALL')) inContainer('does not drop ALL capabilities')
      if (context.capabilities?.add?.some((capability) => capability !== 'NET_BIND_SERVICE')) inContainer('adds capabilities')
      if (!['RuntimeDefault', 'Localhost'].includes(context.seccompProfile?.type ?? '')) inContainer('has no RuntimeDefault seccomp profile')
      if (context.procMount !== undefined && context.procMount !== 'Default') inContainer('unmasks /proc')
      if (container.ports?.some((port) => port.hostPort !== undefined)) inContainer('uses a host port')
      if (context.readOnlyRootFilesystem !== true) inContainer('has a writable root filesystem')
      // Without requests the scheduler places the pod blind and evicts it first under pressure;
      // without limits one pod can take its node's CPU or memory from every other.
      for (const kind of ['requests', 'limits'] as const) {
        for (const resource of ['cpu', 'memory'] as const) {
          if (!container.resources?.[kind]?.[resource]) inContainer(`has no resources.${kind}.${resource}`)
        }
      }
      // Init containers run to completion before the others start: Kubernetes refuses probes on them.
      for (const probe of ['startupProbe', 'livenessProbe', 'readinessProbe'] as const) {
        if (!initContainers.has(container) && !container[probe]) inContainer(`has no ${probe}`)
      }
    }
  }
  return problems
}

/** A service the base deploys: the container of that name and the settings it reads. */
export interface ServiceDescription {
  config: TObject
  /** Seconds the service takes at most to close once its drain's delay is over (its own deadline). */
  shutdownSeconds: number
  /** The resident memory (MiB) the service was measured to reach at most with these settings, when that depends on them. */
  peakMemoryMiB?: (settings: Readonly<Record<string, unknown>>) => number
  /** What the service keeps in Redis: a cache (may be evicted) or durable data (never). */
  redis?: RedisRole
}

/** How long a stopping pod goes on serving at least: what endpoint removal takes to reach every proxy. */
export const MIN_SHUTDOWN_DELAY_SECONDS = 5

/** A cache and durable data never share one Redis's memory (docs/design.md, "Sharing across replicas"). */
export type RedisRole = 'cache' | 'durable'

/**
 * How much more than the measured peak a memory limit must hold: the measurement used a fake
 * upstream's bodies on a busy machine, and a container over its limit is killed, not slowed.
 */
export const MEMORY_MARGIN = 1.5

const QUANTITY = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)?$/
const BYTES_PER: Readonly<Record<string, number>> = { '': 1, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, k: 1e3, M: 1e6, G: 1e9, T: 1e12 }

/** A Kubernetes memory quantity (`512Mi`, `1Gi`, `500M`, `536870912`) in MiB; undefined for any other form. */
export function mebibytesOf(quantity: string): number | undefined {
  const match = QUANTITY.exec(quantity)
  if (!match) return undefined
  return (Number(match[1]) * BYTES_PER[match[2] ?? '']!) / 2 ** 20
}

/** The settings a container gets: literal values (ConfigMaps included) and those from Secrets. */
export function environmentOf(container: Container, objects: readonly KubernetesObject[]): { values: Labels; fromSecrets: string[]; problems: string[] } {
  const values: Labels = {}
  const fromSecrets: string[] = []
  const problems: string[] = []
  for (const source of container.envFrom ?? []) {
    const configMap = objects.find((object) => object.kind === 'ConfigMap' && object.metadata.name === source.configMapRef?.name)
    // A Secret's keys are not in the repository: nothing could check them.
    if (!configMap) problems.push(`envFrom ${source.configMapRef?.name ?? `Secret ${source.secretRef?.name}`} is no ConfigMap of the base`)
    else Object.assign(values, configMap.data)
  }
  for (const variable of container.env ?? []) {
    if (variable.valueFrom?.secretKeyRef) fromSecrets.push(variable.name)
    else if (variable.value !== undefined) values[variable.name] = variable.value
    else problems.push(`${variable.name} takes its value from something other than a Secret`)
  }
  return { values, fromSecrets, problems }
}

const portOf = (container: Container, port: number | string | undefined) =>
  container.ports?.find((each) => each.name === port || each.containerPort === port)?.containerPort

/**
 * Each service's pods are configured only with settings it reads, with values it accepts, and
 * probed and scraped on the port it listens on. The paths are checked against the running
 * service by the tests; here, that they are the paths meant for each purpose.
 */
export function serviceProblems(objects: readonly KubernetesObject[], services: Readonly<Record<string, ServiceDescription>>): string[] {
  const problems: string[] = []
  for (const [name, { config, shutdownSeconds, peakMemoryMiB }] of Object.entries(services)) {
    const deployment = workloadsOf(objects).find((workload) => workload.kind === 'Deployment' && workload.metadata.name === name)
    const container = deployment?.spec.template.spec.containers.find((each) => each.name === name)
    if (!deployment || !container) {
      problems.push(`${name}: no Deployment with a container of that name`)
      continue
    }
    const problem = (message: string) => problems.push(`${of(deployment)}: ${message}`)
    const pod = deployment.spec.template

    const environment = environmentOf(container, objects)
    environment.problems.forEach(problem)
    const names = [...Object.keys(environment.values), ...environment.fromSecrets]
    for (const variable of names.filter((each) => !(each in config.properties))) problem(`${variable} is not a setting ${name} reads`)
    const required = config.required ?? []
    for (const variable of required.filter((each) => !names.includes(each) && config.properties[each]?.default === undefined)) {
      problem(`${variable} is required and not set`)
    }
    let settings: Readonly<Record<string, unknown>> | undefined
    try {
      settings = loadConfig(config, environment.values)
    } catch (error) {
      for (const line of (error as ConfigError).problems) problem(`${name} refuses its settings: ${line}`)
    }
    const port = settings?.PORT as number | undefined
    // A missing limit is podProblems' to name.
    const limit = container.resources?.limits?.memory
    if (peakMemoryMiB && settings && limit !== undefined) {
      const limitMiB = mebibytesOf(limit)
      const peakMiB = Math.ceil(peakMemoryMiB(settings))
      if (limitMiB === undefined) problem(`memory limit ${limit} is not a quantity this check reads (such as 512Mi)`)
      else if (limitMiB < MEMORY_MARGIN * peakMiB) problem(`memory limit ${limit} is under ${MEMORY_MARGIN} × the ${peakMiB} MiB ${name} reaches with its settings`)
    }
    // Kubernetes puts variables for every Service in the namespace into the environment unless
    // told not to: a Service named `redis` means REDIS_PORT=tcp://…, a setting of items-list.
    if (pod.spec.enableServiceLinks !== false) problem('enableServiceLinks is not false')

    const { startupProbe, livenessProbe, readinessProbe } = container
    for (const [probe, path] of [[startupProbe, '/health'], [livenessProbe, '/health'], [readinessProbe, '/ready']] as const) {
      if (probe?.httpGet?.path !== path) problem(`probes ${probe?.httpGet?.path ?? 'nothing'} where ${path} is meant`)
      else if (portOf(container, probe.httpGet.port) !== port) problem(`probes ${path} on a port ${name} does not listen on`)
    }
    const scrape = pod.metadata.annotations ?? {}
    if (scrape['prometheus.io/scrape'] !== 'true' || scrape['prometheus.io/path'] !== '/metrics') problem('is not scraped on /metrics')
    if (Number(scrape['prometheus.io/port']) !== port) problem('is scraped on a port it does not listen on')

    // The service drains by itself on SIGTERM (docs/shutdown.md, "On Kubernetes, without a preStop hook"): a preStop pause would only hold the
    // pod longer, answering /ready 200 while its endpoint is being removed.
    if (container.lifecycle?.preStop) problem('has a preStop hook: the service drains by itself on SIGTERM (SHUTDOWN_DELAY_SECONDS)')
    const delay = settings?.SHUTDOWN_DELAY_SECONDS as number | undefined
    if (delay !== undefined) {
      // Endpoint removal and SIGTERM happen at once: the delay is what lets every proxy catch up.
      if (delay < MIN_SHUTDOWN_DELAY_SECONDS) problem(`SHUTDOWN_DELAY_SECONDS ${delay} stops accepting before proxies have stopped sending (under ${MIN_SHUTDOWN_DELAY_SECONDS} s)`)
      const grace = pod.spec.terminationGracePeriodSeconds ?? 30
      if (grace <= delay + shutdownSeconds) {
        problem(`terminationGracePeriodSeconds ${grace} ends the ${delay} s drain and ${shutdownSeconds} s shutdown early`)
      }
    }
    if (deployment.spec.strategy?.rollingUpdate?.maxUnavailable !== 0) problem('a rolling update may take pods away first (maxUnavailable is not 0)')
  }
  return problems
}

/** Settings whose value is a credential, whatever the service. */
const SECRET_NAME = /(TOKEN|PASSWORD|SECRET|CREDENTIALS?)$/

/** No credential is written in the base: no Secret objects, no literal secret-looking setting. */
export function secretProblems(objects: readonly KubernetesObject[]): string[] {
  const problems: string[] = []
  const literals = (object: KubernetesObject): [string, string][] => {
    if (object.kind === 'ConfigMap') return Object.entries((object.data ?? {}) as Labels)
    return workloadsOf([object])
      .flatMap((workload) => workload.spec.template.spec.containers)
      .flatMap((container) => (container.env ?? []).flatMap(({ name, value }) => (value === undefined ? [] : [[name, value] as [string, string]])))
  }
  for (const object of objects) {
    if (object.kind === 'Secret') problems.push(`${of(object)}: a Secret is written in the repository`)
    for (const [name, value] of literals(object)) {
      if (SECRET_NAME.test(name)) problems.push(`${of(object)}: ${name} is written in the repository`)
      if (URL.canParse(value) && new URL(value).password !== '') problems.push(`${of(object)}: ${name} holds a URL with a password`)
    }
  }
  return problems
}

/** The redis-server flags each role needs (docs/redis.md, "Two Redis servers"); `--maxmemory` is needed by both. */
const ROLE_FLAGS: Readonly<Record<RedisRole, Readonly<Record<string, string>>>> = {
  cache: { save: '', appendonly: 'no', 'maxmemory-policy': 'allkeys-lru' },
  durable: { appendonly: 'yes', appendfsync: 'always', 'maxmemory-policy': 'noeviction' },
}

/** `--name value` pairs of a redis-server command line. */
function flagsOf(args: readonly string[]): Map<string, string> {
  const flags = new Map<string, string>()
  args.forEach((arg, index) => {
    if (arg.startsWith('--')) flags.set(arg.slice(2), args[index + 1] ?? '')
  })
  return flags
}

/**
 * The data tier (docs/redis.md, "Two Redis servers"): each service's Redis (its REDIS_URL's or REDIS_HOST's Service) is a
 * workload of the base configured for what the service keeps there, the cache and the durable data
 * are on different workloads, every Redis loads its ACL users from a Secret, and each service logs
 * in as a user of its own with a password from a Secret.
 */
export function dataTierProblems(objects: readonly KubernetesObject[], services: Readonly<Record<string, ServiceDescription>>): string[] {
  const problems: string[] = []
  const workloads = workloadsOf(objects)
  const redisOf = new Map<RedisRole, Workload>()
  for (const [name, { redis: role }] of Object.entries(services)) {
    const deployment = workloads.find((workload) => workload.kind === 'Deployment' && workload.metadata.name === name)
    const container = deployment?.spec.template.spec.containers.find((each) => each.name === name)
    // A missing Deployment is serviceProblems' to name.
    if (!role || !deployment || !container) continue
    const problem = (message: string) => problems.push(`${of(deployment)}: ${message}`)
    const { values, fromSecrets } = environmentOf(container, objects)
    if (!values.REDIS_USERNAME) problem('sets no REDIS_USERNAME: it would reach Redis as the default user')
    if (!fromSecrets.includes('REDIS_PASSWORD')) problem('takes no REDIS_PASSWORD from a Secret')

    const url = values.REDIS_URL
    const host = (url !== undefined && URL.canParse(url) ? new URL(url).hostname : values.REDIS_HOST ?? 'localhost').split('.')[0]
    const service = objects.find((object) => object.kind === 'Service' && object.metadata.name === host)
    const selector = (service?.spec as { selector?: Labels } | undefined)?.selector ?? {}
    const redis = workloads.find((workload) => selects({ matchLabels: selector }, workload.spec.template.metadata.labels))
    if (!service || !redis) {
      problem(`its Redis, ${host}, is no Service of the base in front of a workload`)
      continue
    }
    const other = [...redisOf.entries()].find(([otherRole, workload]) => otherRole !== role && workload === redis)
    if (other) problem(`keeps its ${role} data on ${of(redis)}, beside the ${other[0]} data`)
    redisOf.set(role, redis)

    const [server] = redis.spec.template.spec.containers
    const flags = flagsOf(server?.args ?? [])
    const wrong = (message: string) => problems.push(`${of(redis)}: ${message}`)
    for (const [flag, value] of Object.entries(ROLE_FLAGS[role])) {
      if (flags.get(flag) !== value) wrong(`holds ${name}'s ${role} data without --${flag} ${JSON.stringify(value)}`)
    }
    if (!flags.get('maxmemory')) wrong('sets no --maxmemory')
    const aclFile = flags.get('aclfile') ?? ''
    const secretVolumes = new Set((redis.spec.template.spec.volumes ?? []).filter((volume) => 'secret' in volume).map((volume) => volume.name))
    const fromSecret = (server?.volumeMounts ?? []).some((mount) => secretVolumes.has(mount.name) && aclFile.startsWith(`${mount.mountPath}/`))
    if (!fromSecret) wrong('loads no ACL file (--aclfile) from a Secret: every client would be the all-powerful default user')
  }
  return problems
}
