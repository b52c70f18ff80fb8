import t from 'tap'
import { existsSync } from 'node:fs'
import { readFile, realpath } from 'node:fs/promises'
import { join, sep } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { createClient } from 'redis'
import { startPrivateRedis } from './helpers/redis-server.ts'
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
import { ItemsListConfig } from '../src/config.ts'

const SERVICE = 'items-list'
const LISTENING = /Server listening at http:\/\/127\.0\.0\.1:(\d+)/

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
  t.same(argsOf(image, 'EXPOSE'), [String(ItemsListConfig.properties.PORT.default)], 'the port it listens on by default')
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

t.test('on plain Node 24 the bundle serves /health and the list from Redis, passes its HEALTHCHECK and stops on SIGTERM with exit 0', async (t) => {
  const redis = await startPrivateRedis()
  const inspector = createClient({ socket: { host: '127.0.0.1', port: redis.port } })
  await inspector.connect()
  await inspector.rPush('items', ['green apple', 'pear'])
  const server = runProcess(command, args, {
    cwd: bundle.dir,
    env: { PATH: nodePath(), ...envOf(image), HOST: '127.0.0.1', PORT: '0', REDIS_HOST: '127.0.0.1', REDIS_PORT: String(redis.port) },
  })
  t.teardown(async () => {
    server.child.kill('SIGKILL')
    inspector.destroy()
    await redis.dispose()
  })

  const [, port = ''] = await server.waitFor(LISTENING)
  const base = `http://127.0.0.1:${port}`
  const health = await fetch(`${base}/health`)
  t.equal(health.status, 200)
  t.same(await health.json(), { status: 'ok' })
  await waitForStatus(`${base}/ready`, 200)
  const items = await fetch(`${base}/items/`)
  t.equal(items.status, 200)
  t.same(await items.json(), { items: ['green apple', 'pear'] })

  const [check = '', ...checkArgs] = healthcheckOf(image)
  const healthcheck = () => runProcess(check, checkArgs, { cwd: bundle.dir, env: { PATH: nodePath(), ...envOf(image), PORT: port } }).exited
  t.equal(await healthcheck(), 0, 'the HEALTHCHECK passes while the service runs')

  server.child.kill('SIGTERM')
  t.equal(await server.exited, 0)
  t.equal(await healthcheck(), 1, 'and fails once it has stopped')
})

async function waitForStatus(url: string, status: number) {
  for (let attempt = 0; attempt < 100; attempt++) {
    const res = await fetch(url).catch(() => undefined)
    if (res?.status === status) return
    await sleep(50)
  }
  throw new Error(`${url} never answered ${status}`)
}
