import t from 'tap'
import { createServer } from 'node:http'
import { once } from 'node:events'
import { dirname, delimiter } from 'node:path'
import { fileURLToPath } from 'node:url'
import { eventually, findFreePort, isListening, nodePath, runProcess, runServiceSource, waitForStatus } from '../src/process.ts'

const PACKAGE_ROOT = fileURLToPath(new URL('..', import.meta.url))

t.test('exited resolves only once the output has been read to the end, however long after the exit its pipes close', async (t) => {
  // The process exits at once; a process it started holds its stdout and writes a line 500 ms
  // later. 'exit' would come first: a test reading the output then would miss that line.
  const script = [
    "const { spawn } = require('node:child_process')",
    "spawn(process.execPath, ['-e', 'setTimeout(() => console.log(\"written after the exit\"), 500)'], { stdio: ['ignore', 'inherit', 'inherit'] }).unref()",
    "console.log('exiting')",
  ].join('\n')
  const running = runProcess('node', ['-e', script], { cwd: PACKAGE_ROOT, env: {} })
  t.equal(await running.exited, 0)
  t.equal(running.output(), 'exiting\nwritten after the exit\n')
})

t.test('exited is the exit code, or null when a signal ended the process', async (t) => {
  t.equal(await runProcess('sh', ['-c', 'exit 3'], { cwd: PACKAGE_ROOT, env: {} }).exited, 3)
  const slept = runProcess('sleep', ['60'], { cwd: PACKAGE_ROOT, env: {} })
  slept.child.kill('SIGKILL')
  t.equal(await slept.exited, null)
})

t.test('runProcess gives the command exactly the environment it is told, in its own process group when detached', async (t) => {
  // env -i: neither this test's variables (tap's NODE_OPTIONS, HOME) nor PATH unless given.
  const script = 'echo "ONLY=$ONLY HOME=${HOME:-unset}"; cut -d" " -f5 /proc/$$/stat'
  const attached = runProcess('/bin/sh', ['-c', script], { cwd: PACKAGE_ROOT, env: { ONLY: 'given' } })
  t.equal(await attached.exited, 0)
  const [line, group] = attached.output().trim().split('\n')
  t.equal(line, 'ONLY=given HOME=unset')
  t.not(Number(group), attached.child.pid, "in this process's group")

  const detached = runProcess('/bin/sh', ['-c', script], { cwd: PACKAGE_ROOT, env: {}, detached: true })
  t.equal(await detached.exited, 0)
  t.equal(Number(detached.output().trim().split('\n')[1]), detached.child.pid, 'its own group, led by itself')
})

t.test('runProcess runs node as this Node, and sends stdout nowhere when told to', async (t) => {
  const version = runProcess('node', ['-p', 'process.version'], { cwd: PACKAGE_ROOT, env: {} })
  t.equal(await version.exited, 0)
  t.equal(version.output(), `${process.version}\n`)
  const quiet = runProcess('/bin/sh', ['-c', 'echo out; echo err >&2'], { cwd: PACKAGE_ROOT, env: {}, discardStdout: true })
  t.equal(await quiet.exited, 0)
  t.equal(quiet.output(), 'err\n')
})

t.test('runServiceSource runs an entry from its sources with only the given environment and PATH', async (t) => {
  const service = runServiceSource(PACKAGE_ROOT, { GREETING: 'hello' }, 'test/fixtures/prints.ts')
  t.equal(await service.exited, 0)
  t.match(service.output(), 'to stdout\n')
  t.match(service.output(), `to stderr: GREETING=hello HOME=unset PATH=${process.env.PATH}\n`)

  const path = process.env.PATH
  t.teardown(() => {
    process.env.PATH = path
  })
  delete process.env.PATH
  const quiet = runServiceSource(PACKAGE_ROOT, {}, 'test/fixtures/prints.ts', { discardStdout: true })
  t.equal(await quiet.exited, 0)
  t.equal(quiet.output(), 'to stderr: GREETING=unset HOME=unset PATH=\n', 'stdout sent nowhere; PATH empty when this process has none')
})

t.test('waitFor resolves with the first match once it appears, and rejects with the output when it never does', async (t) => {
  const running = runProcess('/bin/sh', ['-c', 'echo first; sleep 0.2; echo "port 4242"; exec sleep 60'], { cwd: PACKAGE_ROOT, env: {} })
  t.teardown(() => running.child.kill('SIGKILL'))
  const [, port] = await running.waitFor(/port (\d+)/)
  t.equal(port, '4242')
  t.equal((await running.waitFor(/first/))[0], 'first', 'already there')
  await t.rejects(running.waitFor(/never printed/, 100), { message: /^no \/never printed\/ in output:\nfirst\nport 4242\n$/ })
})

t.test('nodePath puts this Node first and leaves out node_modules/.bin directories', async (t) => {
  const path = process.env.PATH
  t.teardown(() => {
    process.env.PATH = path
  })
  process.env.PATH = ['/repo/node_modules/.bin', '/usr/local/bin', '/repo/packages/x/node_modules/.bin', '/usr/bin'].join(delimiter)
  t.same(nodePath().split(delimiter), [dirname(process.execPath), '/usr/local/bin', '/usr/bin'])
  delete process.env.PATH
  t.same(nodePath().split(delimiter), [dirname(process.execPath), ''])
})

t.test('findFreePort finds a port nothing listens on; isListening tells a listening port from a free one', async (t) => {
  const port = await findFreePort()
  t.notOk(await isListening(port), 'free')
  const server = createServer((_request, response) => response.end()).listen(port, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => server.close())
  t.ok(await isListening(port), 'listening')
})

t.test('eventually is true as soon as the condition holds, false once its attempts are spent', async (t) => {
  let calls = 0
  t.ok(await eventually(async () => ++calls === 3, 5, 1))
  t.equal(calls, 3, 'asked until it held, no more')
  calls = 0
  t.notOk(await eventually(async () => (++calls, false), 4, 1))
  t.equal(calls, 4)
})

t.test('waitForStatus resolves once the URL answers the status, and rejects when it never does', async (t) => {
  let status = 503
  const server = createServer((_request, response) => response.writeHead(status).end()).listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => server.close())
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/ready`
  setTimeout(() => (status = 200), 200)
  await t.resolves(waitForStatus(url, 200))
  const nothing = `http://127.0.0.1:${await findFreePort()}/ready`
  await t.rejects(waitForStatus(nothing, 200), { message: `${nothing} never answered 200` })
})
