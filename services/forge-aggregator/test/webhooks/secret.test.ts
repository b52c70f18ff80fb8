import t from 'tap'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ConfigError } from '@repo/config'
import { webhookSecretFrom } from '../../src/webhooks/secret.ts'
import { buildAggregator } from '../helpers/build.ts'
import { githubDeliveries, payloads } from '../helpers/webhook-deliveries.ts'

const dir = await mkdtemp(join(tmpdir(), 'webhook-secret-'))
t.teardown(() => rm(dir, { recursive: true, force: true }))

t.test('the secret comes inline, or from its file without the line break an editor adds', async (t) => {
  t.equal(webhookSecretFrom({}), undefined, 'neither: webhooks off')
  t.equal(webhookSecretFrom({ FORGE_WEBHOOK_SECRET: 'inline' }), 'inline')
  const file = join(dir, 'secret')
  await writeFile(file, 'from a file\n')
  t.equal(webhookSecretFrom({ FORGE_WEBHOOK_SECRET_FILE: file }), 'from a file')
})

t.test('both ways, an unreadable file or an empty one stop the start, naming the variable, never the value', async (t) => {
  const problems = (config: Parameters<typeof webhookSecretFrom>[0], read?: (path: string) => string) => {
    try {
      webhookSecretFrom(config, read)
    } catch (error) {
      t.type(error, ConfigError)
      return (error as ConfigError).problems
    }
    return []
  }
  const empty = join(dir, 'empty')
  await writeFile(empty, '\n')
  t.same(problems({ FORGE_WEBHOOK_SECRET: 'hush-hush', FORGE_WEBHOOK_SECRET_FILE: empty }), [
    'FORGE_WEBHOOK_SECRET and FORGE_WEBHOOK_SECRET_FILE are both set: give the secret one way',
  ])
  t.same(problems({ FORGE_WEBHOOK_SECRET_FILE: join(dir, 'missing') }), ['FORGE_WEBHOOK_SECRET_FILE could not be read (ENOENT)'])
  t.same(problems({ FORGE_WEBHOOK_SECRET_FILE: empty }), ['FORGE_WEBHOOK_SECRET_FILE is empty: the webhook secret cannot be'])
  const failing = () => {
    throw new Error('no code')
  }
  t.same(problems({ FORGE_WEBHOOK_SECRET_FILE: 'x' }, failing), ['FORGE_WEBHOOK_SECRET_FILE could not be read (error)'], 'an error without a code')
  await t.rejects(buildAggregator(t, { env: { FORGE_WEBHOOK_SECRET: 'a', FORGE_WEBHOOK_SECRET_FILE: empty } }), ConfigError, 'the app does not start')
})

t.test('a secret from a file verifies deliveries signed with it', async (t) => {
  const file = join(dir, 'app-secret')
  await writeFile(file, 'the file secret\n')
  const aggregator = await buildAggregator(t, { env: { FORGE_WEBHOOK_SECRET_FILE: file } })
  t.equal((await githubDeliveries('the file secret').deliver(aggregator.app, 'ping', {})).statusCode, 200)
  t.equal((await githubDeliveries('the file secret\n').deliver(aggregator.app, 'ping', {})).statusCode, 401)
  t.same((await githubDeliveries('the file secret').deliver(aggregator.app, 'star', payloads.star('octocat', 'hello'))).json(), { outcome: 'applied' })
})
