import t from 'tap'
import { generateKeyPairSync } from 'node:crypto'
import { ConfigError, loadConfig } from '@repo/config'
import { ForgeAggregatorConfig } from '../../src/config.ts'
import { credentialsFrom } from '../../src/credentials/settings.ts'

t.test('a GitHub App: its id, its installation id and its RSA key (PEM inline, one line with \\n, or a file) authenticate as the installation', async (t) => {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string
  const app = { FORGE_APP_ID: '424242', FORGE_APP_INSTALLATION_ID: '9001' }
  const inline = credentialsFrom(loadConfig(ForgeAggregatorConfig, { ...app, FORGE_APP_PRIVATE_KEY: pem }))
  t.match(inline, { kind: 'app', appId: '424242', installationId: '9001' })
  t.match(credentialsFrom(loadConfig(ForgeAggregatorConfig, { ...app, FORGE_APP_PRIVATE_KEY: pem.replaceAll('\n', '\\n') })), { kind: 'app' })
  const read: string[] = []
  const fromFile = credentialsFrom(loadConfig(ForgeAggregatorConfig, { ...app, FORGE_APP_ID: 'Iv23liClientId', FORGE_APP_PRIVATE_KEY_FILE: '/run/secrets/app.pem' }), (path) => {
    read.push(path)
    return pem
  })
  t.match(fromFile, { kind: 'app', appId: 'Iv23liClientId' })
  t.same(read, ['/run/secrets/app.pem'])
  t.same(credentialsFrom(loadConfig(ForgeAggregatorConfig, { FORGE_TOKEN: 'ghp_x' })), { kind: 'token', token: 'ghp_x' })
  t.same(credentialsFrom(loadConfig(ForgeAggregatorConfig, {})), { kind: 'anonymous' })
})

t.test('a partial App set, an App with a token, two keys, an unreadable file or a key that is no RSA private key: one line each, naming the variables, showing no value', async (t) => {
  const { privateKey: ecKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
  const { publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
  const ec = ecKey.export({ type: 'pkcs8', format: 'pem' }) as string
  const problems = (env: Record<string, string>, readKeyFile?: (path: string) => string) => {
    const error = t.throws(() => credentialsFrom(loadConfig(ForgeAggregatorConfig, env), readKeyFile)) as ConfigError
    t.type(error, ConfigError)
    for (const value of Object.values(env)) t.notOk(error.message.includes(value.slice(0, 40)) && value.length > 20, 'no value shown')
    return error.problems.map((line) => line.split(':')[0])
  }
  t.same(problems({ FORGE_APP_ID: '1' }), [
    'FORGE_APP_INSTALLATION_ID must be set with FORGE_APP_ID',
    'FORGE_APP_PRIVATE_KEY or FORGE_APP_PRIVATE_KEY_FILE must be set with FORGE_APP_ID',
  ])
  t.same(problems({ FORGE_APP_INSTALLATION_ID: '2', FORGE_APP_PRIVATE_KEY: ec, FORGE_TOKEN: 'ghp_secret_token_value_0000000000' }), [
    'FORGE_TOKEN must not be set with FORGE_APP_INSTALLATION_ID, FORGE_APP_PRIVATE_KEY',
    'FORGE_APP_ID must be set with FORGE_APP_INSTALLATION_ID, FORGE_APP_PRIVATE_KEY',
    'FORGE_APP_PRIVATE_KEY must be an RSA private key in PEM (the .pem file GitHub gives for the App)',
  ])
  const app = { FORGE_APP_ID: '1', FORGE_APP_INSTALLATION_ID: '2' }
  t.same(problems({ ...app, FORGE_APP_PRIVATE_KEY: ec, FORGE_APP_PRIVATE_KEY_FILE: '/key.pem' }), ['FORGE_APP_PRIVATE_KEY and FORGE_APP_PRIVATE_KEY_FILE are both set'])
  t.same(problems({ ...app, FORGE_APP_PRIVATE_KEY: publicKey.export({ type: 'spki', format: 'pem' }) as string }), ['FORGE_APP_PRIVATE_KEY must be an RSA private key in PEM (the .pem file GitHub gives for the App)'])
  t.same(problems({ ...app, FORGE_APP_PRIVATE_KEY: 'not a key at all, but a secret-looking value' }), ['FORGE_APP_PRIVATE_KEY must be an RSA private key in PEM (the .pem file GitHub gives for the App)'])
  t.same(problems({ ...app, FORGE_APP_PRIVATE_KEY_FILE: '/nowhere/app.pem' }), ['FORGE_APP_PRIVATE_KEY_FILE could not be read (ENOENT)'])
  t.same(problems({ ...app, FORGE_APP_PRIVATE_KEY_FILE: '/key.pem' }, () => ec), ['FORGE_APP_PRIVATE_KEY_FILE must be an RSA private key in PEM (the .pem file GitHub gives for the App)'])
  t.same(
    problems({ ...app, FORGE_APP_PRIVATE_KEY_FILE: '/key.pem' }, () => {
      throw new Error('odd')
    }),
    ['FORGE_APP_PRIVATE_KEY_FILE could not be read (error)'],
  )
  const badIds = t.throws(() => loadConfig(ForgeAggregatorConfig, { FORGE_APP_ID: 'app one', FORGE_APP_INSTALLATION_ID: 'x' })) as ConfigError
  t.same(badIds.problems, ['FORGE_APP_ID must match pattern "^(?:[0-9]+|Iv[0-9A-Za-z.]+)$"', 'FORGE_APP_INSTALLATION_ID must match pattern "^[0-9]+$"'])
})

t.test('FORGE_APP_PUBLIC=true: the App id and a key are needed, the installation id is an optional default; a token excludes it', async (t) => {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string
  const publicApp = { FORGE_APP_PUBLIC: 'true', FORGE_APP_ID: '424242', FORGE_APP_PRIVATE_KEY: pem }
  t.match(credentialsFrom(loadConfig(ForgeAggregatorConfig, publicApp)), { kind: 'public-app', appId: '424242', defaultInstallationId: undefined })
  t.match(credentialsFrom(loadConfig(ForgeAggregatorConfig, { ...publicApp, FORGE_APP_INSTALLATION_ID: '9001' })), { kind: 'public-app', defaultInstallationId: '9001' })
  t.match(credentialsFrom(loadConfig(ForgeAggregatorConfig, { ...publicApp, FORGE_APP_PUBLIC: 'false', FORGE_APP_INSTALLATION_ID: '9001' })), { kind: 'app' })
  const problems = (env: Record<string, string>) => (t.throws(() => credentialsFrom(loadConfig(ForgeAggregatorConfig, env))) as ConfigError).problems
  t.same(problems({ FORGE_APP_PUBLIC: 'true' }), [
    'FORGE_APP_ID must be set with FORGE_APP_PUBLIC=true: a public GitHub App needs its id and its private key',
    'FORGE_APP_PRIVATE_KEY or FORGE_APP_PRIVATE_KEY_FILE must be set with FORGE_APP_PUBLIC=true: a GitHub App needs its private key',
  ])
  t.same(problems({ ...publicApp, FORGE_TOKEN: 'ghp_x' }), ['FORGE_TOKEN must not be set with FORGE_APP_PUBLIC=true: use a personal token or a GitHub App, not both'])
  t.match(problems({ FORGE_APP_PUBLIC: 'yes' }), [/^FORGE_APP_PUBLIC /])
})
