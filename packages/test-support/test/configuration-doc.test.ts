import t from 'tap'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { configurationDocProblems, documentedVariables, readConfigurationDoc } from '../src/configuration-doc.ts'

const DOC = [
  '# Configuration',
  '',
  '## Variables of both services',
  '',
  '| variable | default | description | more |',
  '|---|---|---|---|',
  '| `HOST` | `0.0.0.0` | listen address | |',
  '| `CORS_ORIGINS` | unset (no CORS headers) | comma-separated origins, or `*` | [CORS](design.md) |',
  '',
  "## forge-aggregator's variables",
  '',
  '| `PORT` | `3000` | listen port | |',
  '',
  "## items-list's variables",
  '',
  '| `PORT` | `8080` | listen port | |',
].join('\n')

const forge = {
  properties: {
    HOST: { default: '0.0.0.0', description: 'listen address' },
    CORS_ORIGINS: { description: 'comma-separated origins, or *' },
    PORT: { default: 3000, description: 'listen port' },
  },
}

t.test('a schema and a doc that agree: no problem; each service reads the shared section and its own', async (t) => {
  t.same(configurationDocProblems(forge, 'forge-aggregator', DOC), [])
  t.same(documentedVariables(DOC, 'items-list').map((row) => `${row.name} ${row.defaultCell}`), ['HOST `0.0.0.0`', 'CORS_ORIGINS unset (no CORS headers)', 'PORT `8080`'])
})

t.test('a variable the schema gains and the doc lacks', async (t) => {
  const schema = { properties: { ...forge.properties, FORGE_TOKEN: { description: 'upstream token' } } }
  t.same(configurationDocProblems(schema, 'forge-aggregator', DOC), ['FORGE_TOKEN: not in docs/configuration.md'])
})

t.test('a variable the doc lists and the schema lacks', async (t) => {
  const { CORS_ORIGINS: _dropped, ...properties } = forge.properties
  t.same(configurationDocProblems({ properties }, 'forge-aggregator', DOC), ['CORS_ORIGINS: in docs/configuration.md ("Variables of both services"), not in the schema'])
})

t.test('a default that changed, one that appeared, one that went away', async (t) => {
  const schema = {
    properties: {
      HOST: { description: 'listen address' },
      CORS_ORIGINS: { default: '*', description: 'comma-separated origins, or *' },
      PORT: { default: 3001, description: 'listen port' },
    },
  }
  t.same(configurationDocProblems(schema, 'forge-aggregator', DOC), [
    'HOST: default is unset in the schema, "`0.0.0.0`" in the doc',
    'CORS_ORIGINS: default is `*` in the schema, "unset (no CORS headers)" in the doc',
    'PORT: default is `3001` in the schema, "`3000`" in the doc',
  ])
})

t.test('a description that differs, or is missing from the schema', async (t) => {
  const schema = { properties: { ...forge.properties, HOST: { default: '0.0.0.0', description: 'where it listens' }, PORT: { default: 3000 } } }
  t.same(configurationDocProblems(schema, 'forge-aggregator', DOC), [
    'HOST: the schema\'s description is "where it listens", the doc\'s "listen address"',
    'PORT: no description in the schema',
  ])
})

t.test('a row cut short: its default and description are empty', async (t) => {
  t.same(documentedVariables('## items-list\n\n| `PORT` |', 'items-list'), [{ name: 'PORT', section: 'items-list', defaultCell: '', description: '' }])
})

t.test('a variable listed twice for one service', async (t) => {
  const doc = `${DOC}\n\n## Tracing, both services\n\n| \`PORT\` | \`3000\` | listen port | |`
  t.same(configurationDocProblems(forge, 'forge-aggregator', doc), ['PORT: listed 2 times (forge-aggregator\'s variables; Tracing, both services)'])
})

t.test('a table under a heading that names no service is refused', async (t) => {
  t.throws(() => documentedVariables('## Other\n\n| `HOST` | `0.0.0.0` | listen address |', 'items-list'), /`HOST` is under "Other", which names no service/)
})

t.test('readConfigurationDoc finds docs/configuration.md above the directory it starts from', async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'configuration-doc-'))
  t.teardown(() => rmSync(root, { recursive: true, force: true }))
  writeFileSync(join(root, 'pnpm-workspace.yaml'), '')
  mkdirSync(join(root, 'docs'))
  mkdirSync(join(root, 'services', 'a', 'test'), { recursive: true })
  writeFileSync(join(root, 'docs', 'configuration.md'), DOC)
  t.equal(readConfigurationDoc(join(root, 'services', 'a', 'test')), DOC)
  t.throws(() => readConfigurationDoc(join(tmpdir(), 'nowhere')), /no pnpm-workspace.yaml above/)
  t.match(readConfigurationDoc(), /^# Configuration/)
})
