import t from 'tap'
import { readFileSync } from 'node:fs'
import nock from 'nock'
import { createClient } from 'redis'
import { ConfigError } from '@repo/config'
import { createTestCertificates, eventually, startPrivateRedis } from '@repo/test-support'
import { buildAggregator } from '../helpers/build.ts'
import { mockUser } from '../helpers/upstream.ts'

const certificates = await createTestCertificates()
t.teardown(() => certificates.dispose())
const redis = await startPrivateRedis({ durable: false, tls: certificates })
t.teardown(() => redis.dispose())
const url = `rediss://localhost:${redis.port}`

t.test('rediss:// with REDIS_CA_FILE: answers are shared over TLS with a Redis whose certificate a private CA signed', async (t) => {
  const { app } = await buildAggregator(t, { env: { REDIS_URL: url, REDIS_CA_FILE: certificates.caFile } })
  const scope = mockUser({ login: 'mona' })
  t.equal((await app.inject({ method: 'GET', url: '/api/forge/users?user_name=mona' })).statusCode, 200)
  scope.done()
  const inspector = await createClient({ url, socket: { tls: true, ca: readFileSync(certificates.caFile, 'utf8') } }).connect()
  t.teardown(() => inspector.destroy())
  t.ok(await eventually(async () => (await inspector.keys('forge:*answer:users/mona')).length === 1), 'the answer reached Redis')
  nock.cleanAll()
})

t.test('an unreadable REDIS_CA_FILE stops the start with a ConfigError naming it', async (t) => {
  await t.rejects(buildAggregator(t, { env: { REDIS_URL: url, REDIS_CA_FILE: '/nonexistent/ca.pem' } }), new ConfigError(['REDIS_CA_FILE cannot be read (ENOENT)']))
})
