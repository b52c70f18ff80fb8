import t from 'tap'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parse } from 'yaml'
import { renderKustomization, type KubernetesObject } from '../src/render.ts'
import { schemaProblems } from '../src/schemas.ts'

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url))

/** An overlay of the component alone, as `components:` in a user's overlay brings it. */
async function renderComponent(): Promise<KubernetesObject[]> {
  const dir = await mkdtemp(join(tmpdir(), 'overlay-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  await writeFile(join(dir, 'kustomization.yaml'), `components: [${relative(dir, here('../components/prometheus-rules'))}]\n`)
  return renderKustomization(dir)
}

const rendered = await renderComponent()
const rule = rendered[0] as KubernetesObject & { spec: { groups: unknown[] } }

t.test('the prometheus-rules component adds one PrometheusRule, valid against the Prometheus Operator’s CRD', async (t) => {
  t.same(rendered.map((object) => `${object.apiVersion} ${object.kind}/${object.metadata.name}`), ['monitoring.coreos.com/v1 PrometheusRule/forge-items'])
  t.same(await schemaProblems(rendered, { customResources: true }), [])
})

t.test('its groups are deploy/prometheus/alerts.yml’s, rule for rule', async (t) => {
  const alerts = parse(await readFile(here('../../prometheus/alerts.yml'), 'utf8')) as { groups: unknown[] }
  t.same(rule.spec.groups, alerts.groups, 'copy the groups of alerts.yml into components/prometheus-rules/prometheus-rule.yaml')
})

t.test('the base does not include it: it applies on a cluster without the Prometheus Operator’s CRDs', async (t) => {
  const base = await renderKustomization(here('..'))
  t.notOk(base.some((object) => object.apiVersion.startsWith('monitoring.coreos.com/')))
  t.same(await schemaProblems([...base, rule]), [
    'PrometheusRule/forge-items: monitoring.coreos.com/v1 needs its CustomResourceDefinition; offer it in a component, not in the base',
  ], 'a base that included it would be refused')
})

t.test('a PrometheusRule that breaks the CRD’s schema is a problem', async (t) => {
  const broken = { ...rule, spec: { groups: [{ rules: [{ alert: 'A', for: 5 }] }] } }
  t.match(await schemaProblems([broken], { customResources: true }), [/^PrometheusRule\/forge-items: .*must have required property name/])
})
