import t from 'tap'
import { fileURLToPath } from 'node:url'
import { request, Agent } from 'undici'
import { Type } from '@sinclair/typebox'
import { serverSettings } from '@repo/config'
import { LISTENING, runServiceSource, waitForStatus } from '@repo/test-support'
import { runService } from '../../src/index.ts'

const PACKAGE_ROOT = fileURLToPath(new URL('../..', import.meta.url))

function startFixture(env: Record<string, string>) {
  return runServiceSource(PACKAGE_ROOT, { HOST: '127.0.0.1', ...env }, 'test/fixtures/slow-service.ts')
}

async function portOf(service: ReturnType<typeof startFixture>): Promise<number> {
  const [, port] = await service.waitFor(LISTENING)
  return Number(port)
}

t.test('an invalid variable exits 1 with one line naming it, and never its value', async (t) => {
  const service = startFixture({ GREETING: 'x', PORT: 'many' })
  t.equal(await service.exited, 1)
  t.match(service.output(), /Invalid configuration:\n\s+PORT must be integer\n\s+GREETING must NOT have fewer than 2 characters/)
  t.notMatch(service.output(), /many|"x"/)
})

t.test('a ConfigError thrown while building the app exits 1 with its lines, as an invalid variable does', async (t) => {
  const service = startFixture({ GREETING: 'contradiction' })
  t.equal(await service.exited, 1)
  t.match(service.output(), /Invalid configuration:\n\s+GREETING contradicts itself/)
  t.notMatch(service.output(), /at .*\(/, 'no stack frames')
})

t.test('any other error while building the app is not taken for a configuration error', async (t) => {
  const service = startFixture({ GREETING: 'explode' })
  t.equal(await service.exited, 1)
  t.match(service.output(), 'the build failed')
  t.notMatch(service.output(), 'Invalid configuration')
})

t.test('an invalid configuration stops before anything starts: the reasons on stderr, then exit 1', async (t) => {
  // In this process, unlike the test above, so that mutation testing sees this path run: it
  // stops before runService opens stdout or installs its signal handlers, so nothing leaks.
  const exited = new Error('process.exit')
  const exits = t.capture(process, 'exit', () => {
    throw exited
  })
  const errors = t.capture(console, 'error', () => {})
  let started = false
  const running = runService({
    name: 'invalid',
    config: Type.Object(serverSettings({ port: 0 })),
    env: { PORT: 'many', LOG_LEVEL: 'chatty' },
    start: async () => {
      started = true
      throw new Error('never reached')
    },
  })
  t.equal(await running.catch((error: unknown) => error), exited, 'stopped by process.exit')
  t.same(exits().map((call) => call.args), [[1]], 'exit code 1')
  const messages = errors().map((call) => call.args as unknown[])
  t.same(messages, [['Invalid configuration:\n  PORT must be integer\n  LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent']])
  t.notOk(started, 'the app is never built')
})

t.test('SIGTERM lets the in-flight request finish, closes the dependencies after the app, and exits 0', async (t) => {
  // Without the drain's delay (drain-process.test.ts is about the delay): straight to closing.
  const service = startFixture({ SHUTDOWN_DELAY_SECONDS: '0' })
  t.teardown(() => service.child.kill('SIGKILL'))
  const port = await portOf(service)
  const agent = new Agent({ keepAliveTimeout: 60_000 })
  t.teardown(() => agent.close())

  const inFlight = request(`http://127.0.0.1:${port}/slow`, { dispatcher: agent })
  await service.waitFor(/slow request started/)
  service.child.kill('SIGTERM')

  const response = await inFlight
  t.equal(response.statusCode, 200)
  t.same(await response.body.json(), { greeting: 'hello' })
  t.equal(await service.exited, 0)
  t.match(service.output(), /"msg":"shutting down"[\s\S]*"msg":"dependencies closed"/)
})

t.test('an uncaught error is logged without a stack, closes the same way, and exits 1', async (t) => {
  const service = startFixture({
    // A crash closes at once, whatever the drain's delay.
    SHUTDOWN_DELAY_SECONDS: '60',
    // A crash on demand: SIGUSR2 throws from an event handler, outside any request.
    NODE_OPTIONS: '--import=data:text/javascript,process.on(%22SIGUSR2%22,()=>{throw%20new%20Error(%22boom%22)})',
  })
  t.teardown(() => service.child.kill('SIGKILL'))
  await portOf(service)
  const crashedAt = Date.now()
  service.child.kill('SIGUSR2')
  t.equal(await service.exited, 1)
  t.ok(Date.now() - crashedAt < 5_000, 'without the drain delay')
  t.match(service.output(), /"err":\{"type":"Error","message":"boom"\},"msg":"shutting down after an uncaught error"/)
  t.match(service.output(), /"msg":"dependencies closed"/)
  t.notMatch(service.output(), /at .*\(/, 'no stack frames')
})

t.test('a second signal during the drain exits 1 at once, without waiting for the delay', async (t) => {
  const service = startFixture({ SHUTDOWN_DELAY_SECONDS: '60' })
  t.teardown(() => service.child.kill('SIGKILL'))
  const port = await portOf(service)
  service.child.kill('SIGINT')
  await waitForStatus(`http://127.0.0.1:${port}/ready`, 503)
  const secondAt = Date.now()
  service.child.kill('SIGINT')
  t.equal(await service.exited, 1)
  t.ok(Date.now() - secondAt < 5_000, 'at once')
})
