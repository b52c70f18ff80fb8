import t from 'tap'
import { fileURLToPath } from 'node:url'
import { createTestCertificates, runServiceSource, startPrivateRedis } from '@repo/test-support'
import { buildService } from '../helpers/service.ts'

const certificates = await createTestCertificates()
t.teardown(() => certificates.dispose())
const redis = await startPrivateRedis({ tls: certificates })
t.teardown(() => redis.dispose())
const url = `rediss://localhost:${redis.port}`

t.test('rediss:// with REDIS_CA_FILE: the item store speaks TLS to a Redis whose certificate a private CA signed', async (t) => {
  // The helper's own inspector speaks plain text: it never connects here, and is not needed.
  const { app, untilReady } = await buildService(t, { redis, env: { REDIS_URL: url, REDIS_CA_FILE: certificates.caFile }, ready: false })
  await untilReady()
  t.equal((await app.inject({ method: 'POST', url: '/items', headers: { 'idempotency-key': 'tls-1' }, payload: { name: 'sealed' } })).statusCode, 201)
  t.same((await app.inject({ method: 'GET', url: '/items' })).json(), { items: ['sealed'] })
})

t.test('rediss:// without REDIS_CA_FILE: a certificate no trusted CA signed is refused, and the store is unavailable (503)', async (t) => {
  const { app, logs } = await buildService(t, { redis, env: { REDIS_URL: url }, ready: false })
  const outage = await logs.waitFor((line) => line.msg === 'Redis unavailable; reconnecting in the background')
  t.match(outage, { err: { code: /CERT|SELF_SIGNED|UNABLE_TO_VERIFY/ } })
  t.equal((await app.inject({ method: 'GET', url: '/ready' })).statusCode, 503)
  t.equal((await app.inject({ method: 'POST', url: '/items', payload: { name: 'exposed' } })).statusCode, 503)
})

t.test('an unreadable REDIS_CA_FILE stops the process with exit code 1, naming the variable', async (t) => {
  const server = runServiceSource(fileURLToPath(new URL('../..', import.meta.url)), { REDIS_URL: url, REDIS_CA_FILE: '/nonexistent/ca.pem', REDIS_PASSWORD: 'hunter2' })
  t.equal(await server.exited, 1)
  t.match(server.output(), /REDIS_CA_FILE cannot be read \(ENOENT\)/)
  t.notMatch(server.output(), 'hunter2')
})
