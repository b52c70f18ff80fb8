import { existsSync } from 'node:fs'
import { cp, mkdir, mkdtemp, readdir, readFile, realpath, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, relative, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import dockerignoreModule from '@balena/dockerignore'
import { DockerfileParser, type ImageTemplate } from 'dockerfile-ast'
import type { Test } from 'tap'
import { parse as parseYaml } from 'yaml'
import { LISTENING, nodePath, runProcess } from './process.ts'

/**
 * What a service's production-bundle test needs to check its image without Docker: the build
 * context copied as `docker build` would send it (`.dockerignore` applied), the build stage's own
 * `RUN` steps (`pnpm fetch`, then scripts/bundle-service.sh) run on that copy with an empty pnpm
 * store and cache, as on a machine that never ran pnpm, and the final stage's `ENV`, `CMD` and
 * `HEALTHCHECK` read from the Dockerfile, so that what the test starts is what the image starts.
 */

const REPO_ROOT = fileURLToPath(new URL('../../..', import.meta.url))

// Its types declare an ES default export, but the package is CommonJS (`module.exports = factory`):
// Node's default import is the factory itself, which TypeScript types as `.default`.
const dockerignore = dockerignoreModule as unknown as typeof dockerignoreModule.default

/**
 * Fetching the lockfile's packages into an empty store, then installing, building and deploying,
 * takes about 40 s on an idle machine and several times that while every package's tests run
 * beside it; a test file using this allows 480 s in all.
 */
const BUILD_DEADLINE_MS = 420_000

interface ProductionBundle {
  /** The bundle: what the final stage copies to its WORKDIR. */
  dir: string
  /** The build stage's bundle command, as the Dockerfile writes it. */
  command: string[]
  /** The build stage's steps, in order, as the Dockerfile writes them (pnpm's own setup left out). */
  steps: string[][]
  /** The pnpm store the build filled; it was empty before. */
  store: string
  /** The image's last stage, as the Dockerfile writes it. */
  image: ImageTemplate
  /** Removes the copied context and the bundle. */
  dispose(): Promise<void>
}

/** What a service's production-bundle test says of its own service. */
export interface BundleCheck {
  service: string
  /** The port the service listens on by default: the one its image must EXPOSE. */
  defaultPort: number
  /** Starts what the real endpoint needs (closed at the end of `t`) and returns the service's environment for it. */
  dependencies(t: Test): Promise<Record<string, string>>
  /** The real endpoint, for the test's title: "the list from Redis". */
  endpoint: string
  /** Calls that endpoint on the running bundle (at `base`) and checks its answer. */
  checkEndpoint(t: Test, base: string): Promise<void>
}

/**
 * The production-bundle test of one service: builds the bundle exactly as its image does, then
 * checks the final stage (official Node 24 slim image, exec-form `node dist/server.js`, non-root,
 * production), the bundle's contents (no sources, no dev dependency, locked versions, workspace
 * packages as their built dist/), and runs it on plain Node 24: /health, the real endpoint, the
 * HEALTHCHECK, and SIGTERM.
 */
export async function testProductionBundle(t: Test, check: BundleCheck): Promise<void> {
  const { service } = check
  // A copy of the repository is fetched, installed, built and deployed first: tens of seconds.
  t.setTimeout(480_000)
  const bundle = await buildProductionBundle(service)
  t.teardown(() => bundle.dispose())
  const { image } = bundle
  const [command = '', ...args] = execForm(image.getCMDs()[0]?.getArgumentsContent() ?? 'null')

  t.test('the image runs `node dist/server.js` in exec form as the non-root node user, in production', async (t) => {
    t.match(image.getFROMs()[0]?.getImage(), /^node:24(\.\d+){0,2}-slim$/, 'on the official Node 24 slim image')
    t.same(
      image.getCOPYs().map((copy) => [...copy.getFlags().map(String), ...copy.getArguments().map((argument) => argument.getValue())]),
      [['--from=build', bundle.command.at(-1), './']],
      'it holds the bundle and nothing else',
    )
    t.same(argsOf(image, 'USER'), ['node'])
    t.same(envOf(image), { NODE_ENV: 'production' })
    t.same(argsOf(image, 'EXPOSE'), [String(check.defaultPort)], 'the port it listens on by default')
    t.same([command, ...args], ['node', 'dist/server.js'])
    const manifest = JSON.parse(await readFile(join(REPO_ROOT, 'services', service, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>
    }
    t.equal(manifest.scripts['start:prod'], 'node dist/server.js', 'as `pnpm start:prod` does')
  })

  t.test('the image content builds from the lockfile alone, with an empty pnpm store and cache', async (t) => {
    t.same(
      bundle.steps.map((step) => step.join(' ')),
      ['pnpm fetch --ignore-scripts', `bash scripts/bundle-service.sh ${service} ${bundle.command.at(-1)}`],
      'the build stage fetches what the lockfile names, then bundles',
    )
    t.ok(existsSync(bundle.store), 'from the store it filled itself')
  })

  t.test('the bundle is built by scripts/bundle-service.sh and holds the compiled service and its production dependencies only', async (t) => {
    t.ok(existsSync(join(bundle.dir, 'dist', 'server.js')))
    t.notOk(existsSync(join(bundle.dir, 'src')), 'no TypeScript sources')
    t.notOk(existsSync(join(bundle.dir, 'node_modules', 'tap')), 'no tap')
    t.notOk(existsSync(join(bundle.dir, 'node_modules', 'typescript')), 'no typescript')
    t.same(await devDependenciesIn(bundle.dir, service), [], 'no devDependency of the service or the repository')
    t.same(await unlockedIn(bundle.dir), [], 'every package at the version pnpm-lock.yaml holds')
  })

  t.test('workspace packages are copied into the bundle and resolve to their built dist/ without the source condition', async (t) => {
    const inside = (await realpath(bundle.dir)) + sep
    const resolved = await workspaceResolutions(bundle.dir, service)
    t.ok(resolved.length > 0, 'the service uses workspace packages')
    for (const { name, path } of resolved) {
      t.ok(path.startsWith(inside), `${name} is a copy inside the bundle, not a link to the workspace`)
      t.match(path, /[\\/]dist[\\/]index\.js$/, `${name} resolves to dist/index.js`)
    }
  })

  t.test(`on plain Node 24 the bundle serves /health and ${check.endpoint}, passes its HEALTHCHECK and stops on SIGTERM with exit 0`, async (t) => {
    const env = await check.dependencies(t)
    const server = runProcess(command, args, {
      cwd: bundle.dir,
      env: { PATH: nodePath(), ...envOf(image), HOST: '127.0.0.1', PORT: '0', ...env },
    })
    t.teardown(() => server.child.kill('SIGKILL'))

    const [, port = ''] = await server.waitFor(LISTENING)
    const base = `http://127.0.0.1:${port}`
    const health = await fetch(`${base}/health`)
    t.equal(health.status, 200)
    t.same(await health.json(), { status: 'ok' })
    await check.checkEndpoint(t, base)

    const [healthCommand = '', ...healthArgs] = healthcheckOf(image)
    const healthcheck = () =>
      runProcess(healthCommand, healthArgs, { cwd: bundle.dir, env: { PATH: nodePath(), ...envOf(image), PORT: port } }).exited
    t.equal(await healthcheck(), 0, 'the HEALTHCHECK passes while the service runs')

    server.child.kill('SIGTERM')
    t.equal(await server.exited, 0)
    t.equal(await healthcheck(), 1, 'and fails once it has stopped')
  })
}

/** The service's Dockerfile, stage by stage (continuations joined, comments dropped, as Docker reads it). */
async function readDockerfile(service: string): Promise<ImageTemplate[]> {
  const dockerfile = DockerfileParser.parse(await readFile(join(REPO_ROOT, 'services', service, 'Dockerfile'), 'utf8'))
  return dockerfile.getFROMs().map((from) => dockerfile.getContainingImage(from.getRange().start)!)
}

/** The arguments of every `keyword` instruction of `stage`, as written (flags left out). */
function argsOf(stage: ImageTemplate, keyword: string): string[] {
  return stage
    .getInstructions()
    .filter((instruction) => instruction.getKeyword() === keyword)
    .map((instruction) => instruction.getArgumentsContent() ?? '')
}

/** An exec-form (JSON array) command; a shell-form one would not get signals as PID 1. */
function execForm(args: string): string[] {
  const parsed: unknown = JSON.parse(args)
  if (!Array.isArray(parsed) || !parsed.every((word) => typeof word === 'string')) {
    throw new Error(`not an exec-form command: ${args}`)
  }
  return parsed
}

/** The variables `ENV` sets in `stage`, quotes and escapes resolved. */
function envOf(stage: ImageTemplate): Record<string, string> {
  const properties = stage.getENVs().flatMap((env) => env.getProperties())
  return Object.fromEntries(properties.map((property) => [property.getName(), property.getUnescapedValue() ?? '']))
}

/** The HEALTHCHECK's command, in exec form. */
function healthcheckOf(stage: ImageTemplate): string[] {
  const [healthcheck] = stage.getHEALTHCHECKs()
  const subcommand = healthcheck?.getSubcommand()
  const args = healthcheck?.getArgumentsContent() ?? ''
  // The arguments begin with the subcommand; what follows CMD is the command.
  if (subcommand?.getValue() !== 'CMD') throw new Error(`no HEALTHCHECK CMD: ${args}`)
  return execForm(args.slice(subcommand.getValue().length))
}

/**
 * Copies the build context, the repository as `docker build .` sends it, into a temporary
 * directory and runs the build stage's `RUN` steps there in order (the bundle's outdir moved into
 * the temporary directory), with an empty HOME, pnpm store and cache of their own and nothing else
 * of the caller's environment but how the registry is reached. The copy holds no node_modules or
 * dist, and the store starts empty, so nothing installed, built or cached on this machine can leak in.
 */
async function buildProductionBundle(service: string): Promise<ProductionBundle> {
  const stages = await readDockerfile(service)
  const build = stages[0]
  const image = stages.at(-1)
  if (!build || !image || build === image) throw new Error(`the ${service} Dockerfile is not multi-stage`)
  // Corepack installs the pnpm the image builds with; the test runs the one that runs it.
  const steps = build
    .getInstructions()
    .filter((instruction) => instruction.getKeyword() === 'RUN')
    .map((run) => run.getArguments().map((argument) => argument.getValue()))
    .filter(([command]) => command !== 'corepack')
  const bundleSteps = steps.filter((step) => step.includes('scripts/bundle-service.sh'))
  if (bundleSteps.length !== 1) throw new Error(`the ${service} build stage must RUN scripts/bundle-service.sh once`)
  const command = bundleSteps[0]!

  const work = await mkdtemp(join(tmpdir(), `${service}-bundle-`))
  const dispose = () => rm(work, { recursive: true, force: true })
  try {
    const context = join(work, 'context')
    const dir = join(work, 'bundle')
    const home = join(work, 'home')
    const store = join(work, 'pnpm-store')
    await copyBuildContext(context)
    await mkdir(home)
    const env = { ...buildEnvironment(home, store, join(work, 'pnpm-cache')), ...envOf(build) }
    const deadline = Date.now() + BUILD_DEADLINE_MS
    for (const step of steps) {
      await runStep(step === command ? [...step.slice(0, -1), dir] : step, context, env, deadline)
    }
    return { dir, command, steps, store, image, dispose }
  } catch (error) {
    await dispose()
    throw error
  }
}

/** Runs one build step, or fails with what it said, also when it outlives the build's deadline. */
async function runStep(step: string[], cwd: string, env: Record<string, string>, deadline: number): Promise<void> {
  const run = runProcess(step[0]!, step.slice(1), { cwd, env, detached: true })
  // pnpm retries an unreachable registry for minutes: fail with what it said, before the test's own timeout.
  const timer = setTimeout(
    () => {
      try {
        process.kill(-run.child.pid!, 'SIGKILL')
      } catch {
        // It exited just now: nothing left to stop.
      }
    },
    Math.max(0, deadline - Date.now()),
  )
  const code = await run.exited.finally(() => clearTimeout(timer))
  if (code !== 0) {
    const outcome = code === null ? `was stopped after the build's ${BUILD_DEADLINE_MS / 1000} s` : `exited ${code}`
    throw new Error(`${step.join(' ')} ${outcome}:\n${run.output()}`)
  }
}

/**
 * The repository without what `.dockerignore` excludes, matched as Docker matches it (a pattern
 * also excludes what a matched directory holds). A directory it excludes is not walked, so an
 * exception (`!`) for something inside one would be lost: such a file is refused rather than
 * copied differently from Docker.
 */
async function copyBuildContext(destination: string): Promise<void> {
  const text = await readFile(join(REPO_ROOT, '.dockerignore'), 'utf8')
  if (/^\s*!/m.test(text)) throw new Error('.dockerignore: exceptions (!) are not supported by this copy')
  const ignored = dockerignore().add(text)
  await cp(REPO_ROOT, destination, {
    recursive: true,
    verbatimSymlinks: true,
    filter: (source) => {
      const path = relative(REPO_ROOT, source).split(sep).join('/')
      return path === '' || !ignored.ignores(path)
    },
  })
}

/**
 * The build's environment, as in a fresh image: the Node 24 running this test first on PATH (the
 * image's node), no node_modules/.bin of the working tree, an empty HOME, pnpm store and metadata
 * cache of the build's own, and of the caller's variables only how the registry is reached.
 */
function buildEnvironment(home: string, store: string, cache: string): Record<string, string> {
  const passed = /^(TMPDIR|NODE_EXTRA_CA_CERTS|SSL_CERT_\w+|(HTTPS?|NO|ALL)_PROXY|(https?|no|all)_proxy)$/
  const env: Record<string, string> = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (value !== undefined && passed.test(key)) env[key] = value
  }
  return { ...env, PATH: nodePath(), HOME: home, npm_config_store_dir: store, npm_config_cache_dir: cache }
}

/** Where `specifier` resolves from `dir` on plain Node (no `--conditions`), as a real path. */
async function resolveFrom(dir: string, specifier: string): Promise<string> {
  const run = runProcess(
    'node',
    ['--input-type=module', '--eval', `process.stdout.write(import.meta.resolve(${JSON.stringify(specifier)}))`],
    { cwd: dir, env: { PATH: nodePath() } },
  )
  if ((await run.exited) !== 0) throw new Error(`${specifier} does not resolve from ${dir}:\n${run.output()}`)
  return realpath(fileURLToPath(run.output()))
}

/**
 * The service's and the repository root's devDependencies (those that are not also production
 * dependencies of the service) that the bundle holds, at its top level or in pnpm's virtual store.
 */
async function devDependenciesIn(dir: string, service: string): Promise<string[]> {
  const manifest = join(REPO_ROOT, 'services', service, 'package.json')
  // A name the tests also use may be there for production's sake: @opentelemetry/api is a
  // dependency of service-kit, @types/node one of protobufjs (OpenTelemetry's OTLP exporters).
  const production = new Set([...(await dependencyNames(manifest, 'dependencies')), ...(await requiredIn(dir))])
  const dev = [
    ...(await dependencyNames(manifest, 'devDependencies')),
    ...(await dependencyNames(join(REPO_ROOT, 'package.json'), 'devDependencies')),
  ].filter((name) => !production.has(name))
  const installed = new Set((await installedPackages(dir)).map((installedPackage) => installedPackage.name))
  const found = dev.filter((name) => installed.has(name) || existsSync(join(dir, 'node_modules', name)))
  return [...new Set(found)].sort()
}

/** The bundle's registry packages (`name@version`) at a version the repository's lockfile does not hold. */
async function unlockedIn(dir: string): Promise<string[]> {
  const locked = await lockedPackages()
  return (await installedPackages(dir))
    .filter(({ version }) => !version.startsWith('file+'))
    .map(({ name, version }) => `${name}@${version}`)
    .filter((id) => !locked.has(id))
}

/** Where each workspace package the service depends on resolves from the bundle, on plain Node. */
async function workspaceResolutions(dir: string, service: string): Promise<Array<{ name: string; path: string }>> {
  const names = await dependencyNames(join(REPO_ROOT, 'services', service, 'package.json'), 'dependencies')
  const workspace = names.filter((name) => name.startsWith('@repo/'))
  return Promise.all(workspace.map(async (name) => ({ name, path: await resolveFrom(dir, name) })))
}

interface InstalledPackage {
  name: string
  /** A registry version, or `file+…` for a copied workspace package. */
  version: string
  /** Its directory in the virtual store. */
  entry: string
}

/** Every name a package of the bundle depends on (as a dependency, optional or peer): what production needs. */
async function requiredIn(dir: string): Promise<Set<string>> {
  const store = join(dir, 'node_modules', '.pnpm')
  const required = new Set<string>()
  for (const { name, entry } of await installedPackages(dir)) {
    const manifest = JSON.parse(await readFile(join(store, entry, 'node_modules', name, 'package.json'), 'utf8')) as Record<string, unknown>
    for (const field of ['dependencies', 'optionalDependencies', 'peerDependencies']) {
      for (const dependency of Object.keys(manifest[field] ?? {})) required.add(dependency)
    }
  }
  return required
}

/** Every package in pnpm's virtual store of the bundle. */
async function installedPackages(dir: string): Promise<InstalledPackage[]> {
  const entries = await readdir(join(dir, 'node_modules', '.pnpm'))
  return entries
    .filter((entry) => entry !== 'node_modules' && entry !== 'lock.yaml')
    .map((entry) => {
      // "@scope+name@version_peers": the first "@" after a scope's own; no version holds a "_".
      const at = entry.indexOf('@', 1)
      return { name: entry.slice(0, at).replace('+', '/'), version: entry.slice(at + 1).split('_')[0]!, entry }
    })
}

/** Every `name@version` the lockfile resolves: the keys of its `packages` (lockfile v9 keeps peers to `snapshots`). */
async function lockedPackages(): Promise<Set<string>> {
  const lockfile = parseYaml(await readFile(join(REPO_ROOT, 'pnpm-lock.yaml'), 'utf8')) as { packages?: Record<string, unknown> }
  return new Set(Object.keys(lockfile.packages ?? {}))
}

async function dependencyNames(packageJson: string, field: 'dependencies' | 'devDependencies'): Promise<string[]> {
  const manifest = JSON.parse(await readFile(packageJson, 'utf8')) as Record<string, Record<string, string> | undefined>
  return Object.keys(manifest[field] ?? {})
}
