import t from 'tap'
import { existsSync } from 'node:fs'
import { readFile, realpath } from 'node:fs/promises'
import { join, sep } from 'node:path'
import { startLocalUpstream } from './helpers/local-upstream.ts'
import { answerRepository, REPOSITORY_COUNTS } from './helpers/repository-upstream.ts'
import {
  REPO_ROOT,
  argsOf,
  buildProductionBundle,
  devDependenciesIn,
  envOf,
  execForm,
  healthcheckOf,
  nodePath,
  runProcess,
  unlockedIn,
  workspaceResolutions,
} from '../../../scripts/production-bundle.ts'
import { ForgeAggregatorConfig } from '../src/config.ts'

const SERVICE = 'forge-aggregator'
const LISTENING = /Server listening at http:\/\/127\.0\.0\.1:(\d+)/
const DEFAULT_USER = ForgeAggregatorConfig.properties.FORGE_DEFAULT_USER.default as string

// A copy of the repository is installed, built and deployed first: tens of seconds.
t.setTimeout(180_000)

const bundle = await buildProductionBundle(SERVICE)
t.teardown(() => bundle.dispose())
const { image } = bundle
const [command = '', ...args] = execForm(argsOf(image, 'CMD')[0] ?? 'null')

t.test('the image runs `node dist/server.js` in exec form as the non-root node user, in production', async (t) => {
  t.match(image.from, /^node:24(\.\d+){0,2}-slim$/, 'on the official Node 24 slim image')
  t.same(argsOf(image, 'COPY'), [`--from=build ${bundle.command.at(-1)} ./`], 'it holds the bundle and nothing else')
  t.same(argsOf(image, 'USER'), ['node'])
  t.same(envOf(image), { NODE_ENV: 'production' })
  t.same(argsOf(image, 'EXPOSE'), [String(ForgeAggregatorConfig.properties.PORT.default)], 'the port it listens on by default')
  t.same([command, ...args], ['node', 'dist/server.js'])
  const manifest = JSON.parse(await readFile(join(REPO_ROOT, 'services', SERVICE, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>
  }
  t.equal(manifest.scripts['start:prod'], 'node dist/server.js', 'as `pnpm start:prod` does')
})

t.test('the bundle is built by scripts/bundle-service.sh and holds the compiled service and its production dependencies only', async (t) => {
  t.same(bundle.command.slice(0, -1), ['bash', 'scripts/bundle-service.sh', SERVICE])
  t.ok(existsSync(join(bundle.dir, 'dist', 'server.js')))
  t.notOk(existsSync(join(bundle.dir, 'src')), 'no TypeScript sources')
  t.notOk(existsSync(join(bundle.dir, 'node_modules', 'tap')), 'no tap')
  t.notOk(existsSync(join(bundle.dir, 'node_modules', 'typescript')), 'no typescript')
  t.same(await devDependenciesIn(bundle.dir, SERVICE), [], 'no devDependency of the service or the repository')
  t.same(await unlockedIn(bundle.dir), [], 'every package at the version pnpm-lock.yaml holds')
})

t.test('workspace packages are copied into the bundle and resolve to their built dist/ without the source condition', async (t) => {
  const inside = (await realpath(bundle.dir)) + sep
  const resolved = await workspaceResolutions(bundle.dir, SERVICE)
  t.same(resolved.map(({ name }) => name).sort(), ['@repo/config', '@repo/http-errors', '@repo/service-kit'])
  for (const { name, path } of resolved) {
    t.ok(path.startsWith(inside), `${name} is a copy inside the bundle, not a link to the workspace`)
    t.match(path, /[\\/]dist[\\/]index\.js$/, `${name} resolves to dist/index.js`)
  }
})

t.test('on plain Node 24 the bundle serves /health and a repository from the upstream, passes its HEALTHCHECK and stops on SIGTERM with exit 0', async (t) => {
  const upstream = await startLocalUpstream(t, answerRepository(DEFAULT_USER))
  const server = runProcess(command, args, {
    cwd: bundle.dir,
    env: { PATH: nodePath(), ...envOf(image), HOST: '127.0.0.1', PORT: '0', FORGE_API_URL: upstream.url },
  })
  t.teardown(() => server.child.kill('SIGKILL'))

  const [, port = ''] = await server.waitFor(LISTENING)
  const base = `http://127.0.0.1:${port}`
  const health = await fetch(`${base}/health`)
  t.equal(health.status, 200)
  t.same(await health.json(), { status: 'ok' })
  const counts = await fetch(`${base}/api/forge/repos?repo_name=hello-world`)
  t.equal(counts.status, 200)
  t.same(await counts.json(), REPOSITORY_COUNTS)
  t.same(
    upstream.requests.map((request) => request.url),
    [`/repos/${DEFAULT_USER}/hello-world`],
    'one upstream call, for the default user',
  )

  const [check = '', ...checkArgs] = healthcheckOf(image)
  const healthcheck = () => runProcess(check, checkArgs, { cwd: bundle.dir, env: { PATH: nodePath(), ...envOf(image), PORT: port } }).exited
  t.equal(await healthcheck(), 0, 'the HEALTHCHECK passes while the service runs')

  server.child.kill('SIGTERM')
  t.equal(await server.exited, 0)
  t.equal(await healthcheck(), 1, 'and fails once it has stopped')
})
