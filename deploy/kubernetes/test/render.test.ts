import t, { type Test } from 'tap'
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { containersOf, renderKustomization, type KubernetesObject } from '../src/render.ts'

/** A kustomization directory holding `files` (paths may name subdirectories), for one test. */
async function kustomizationDir(t: Test, files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'kustomization-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  for (const [name, text] of Object.entries(files)) {
    await mkdir(dirname(join(dir, name)), { recursive: true })
    await writeFile(join(dir, name), text)
  }
  return dir
}

const deployment = (image: string, extra = '') => `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: { app: web }
spec:
  selector: { matchLabels: { app: web } }
  template:
    metadata: { labels: { app: web } }
    spec:
      containers: [{ name: web, image: "${image}" }]
      ${extra}
`

t.test('resources: every document of every file, in order, empty documents skipped', async (t) => {
  const dir = await kustomizationDir(t, {
    'kustomization.yaml': 'resources: [a.yaml, b.yml]',
    'a.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata: { name: one }\n---\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: { name: two }\n',
    'b.yml': 'apiVersion: v1\nkind: Service\nmetadata: { name: three }\n',
  })
  const objects = await renderKustomization(dir)
  t.same(objects.map((object) => `${object.kind}/${object.metadata.name}`), ['ConfigMap/one', 'ConfigMap/two', 'Service/three'])
})

t.test('a kustomization without resources renders nothing', async (t) => {
  const dir = await kustomizationDir(t, { 'kustomization.yaml': 'kind: Kustomization' })
  t.same(await renderKustomization(dir), [])
})

t.test('labels go on every object, on pod templates and claim templates only with includeTemplates, never on selectors', async (t) => {
  const statefulSet = `
apiVersion: apps/v1
kind: StatefulSet
metadata: { name: db }
spec:
  serviceName: db
  selector: { matchLabels: { app: db } }
  template:
    metadata: { labels: { app: db } }
    spec: { containers: [{ name: db, image: db }] }
  volumeClaimTemplates: [{ metadata: { name: data }, spec: {} }]
`
  const templated = await kustomizationDir(t, {
    'kustomization.yaml': 'resources: [web.yaml, db.yaml]\nlabels: [{ pairs: { team: a }, includeTemplates: true }]',
    'web.yaml': deployment('web'),
    'db.yaml': statefulSet,
  })
  const [web, db] = (await renderKustomization(templated)) as [KubernetesObject, KubernetesObject]
  t.same(web.metadata.labels, { app: web.metadata.name, team: 'a' })
  t.same(web.spec, {
    selector: { matchLabels: { app: 'web' } },
    template: { metadata: { labels: { app: 'web', team: 'a' } }, spec: { containers: [{ name: 'web', image: 'web' }] } },
  })
  t.same(db.metadata.labels, { team: 'a' })
  t.match(db.spec, {
    selector: { matchLabels: { app: 'db' } },
    template: { metadata: { labels: { app: 'db', team: 'a' } } },
    volumeClaimTemplates: [{ metadata: { name: 'data', labels: { team: 'a' } } }],
  })

  const plain = await kustomizationDir(t, {
    'kustomization.yaml': 'resources: [web.yaml]\nlabels: [{ pairs: { team: a } }]',
    'web.yaml': deployment('web'),
  })
  const [untemplated] = (await renderKustomization(plain)) as [KubernetesObject]
  t.same(untemplated.metadata.labels, { app: 'web', team: 'a' })
  t.match(untemplated.spec, { template: { metadata: { labels: { app: 'web' } } } })
  t.notMatch(untemplated.spec, { template: { metadata: { labels: { team: 'a' } } } })
  t.same(containersOf(untemplated), [{ name: 'web', image: 'web' }], 'a pod without init containers')
})

t.test('images: a new name, tag or digest for the containers of that image name only', async (t) => {
  const cases: [image: string, rule: string, expected: string][] = [
    ['web', '{ name: web, newName: reg.example/web, newTag: "2" }', 'reg.example/web:2'],
    ['web:1', '{ name: web, newTag: "2" }', 'web:2'],
    ['web:1', '{ name: web, newName: reg.example/web }', 'reg.example/web:1'],
    ['web@sha256:aa', '{ name: web, newName: other }', 'other@sha256:aa'],
    ['web:1', '{ name: web, newTag: "2", digest: "sha256:bb" }', 'web@sha256:bb'],
    ['reg.example:5000/web:1', '{ name: "reg.example:5000/web", newTag: "2" }', 'reg.example:5000/web:2'],
    ['reg.example:5000/web', '{ name: "reg.example:5000/web", newTag: "2" }', 'reg.example:5000/web:2'],
    ['webapp:1', '{ name: web, newTag: "2" }', 'webapp:1'],
  ]
  for (const [image, rule, expected] of cases) {
    const dir = await kustomizationDir(t, {
      'kustomization.yaml': `resources: [web.yaml, cm.yaml]\nimages: [${rule}]`,
      'web.yaml': deployment(image, `initContainers: [{ name: init, image: "${image}" }]`),
      'cm.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata: { name: web }\ndata: { image: web }',
    })
    const [web, configMap] = (await renderKustomization(dir)) as [KubernetesObject, KubernetesObject]
    t.same(
      containersOf(web).map((container) => container.image),
      [expected, expected],
      `${image} with ${rule}`,
    )
    t.same(configMap.data, { image: 'web' }, 'only containers are changed')
  }
})

t.test('components: rendered after the resources; their labels and images apply to all accumulated so far, the parent’s to theirs', async (t) => {
  const dir = await kustomizationDir(t, {
    'kustomization.yaml': 'resources: [web.yaml]\ncomponents: [extras]\nlabels: [{ pairs: { team: a } }]',
    'web.yaml': deployment('web:1'),
    'extras/kustomization.yaml': 'apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources: [cm.yaml]\nlabels: [{ pairs: { extra: "yes" } }]\nimages: [{ name: web, newTag: "2" }]',
    'extras/cm.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata: { name: extra }',
  })
  const [web, configMap] = (await renderKustomization(dir)) as [KubernetesObject, KubernetesObject]
  t.same([web, configMap].map((object) => `${object.kind}/${object.metadata.name}`), ['Deployment/web', 'ConfigMap/extra'])
  t.same(web.metadata.labels, { app: 'web', extra: 'yes', team: 'a' })
  t.same(configMap.metadata.labels, { extra: 'yes', team: 'a' })
  t.same(containersOf(web).map((container) => container.image), ['web:2'])
})

t.test('a Component is rendered only as a component, and a component must be a Component', async (t) => {
  const component = 'apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources: []'
  await t.rejects(renderKustomization(await kustomizationDir(t, { 'kustomization.yaml': component })), /a Component where a Kustomization is expected/)
  const listed = await kustomizationDir(t, { 'kustomization.yaml': 'components: [plain]', 'plain/kustomization.yaml': 'kind: Kustomization' })
  await t.rejects(renderKustomization(listed), /plain: a Kustomization where a Component is expected/)
  const unnamed = await kustomizationDir(t, { 'kustomization.yaml': 'components: [plain]', 'plain/kustomization.yaml': 'resources: []' })
  await t.rejects(renderKustomization(unnamed), /plain: a Kustomization where a Component is expected/, 'kind defaults to Kustomization')
})

t.test('anything this renderer does not implement is an error, not a silent difference from kustomize', async (t) => {
  const refused: [files: Record<string, string>, message: RegExp][] = [
    [{ 'kustomization.yaml': 'namespace: prod\nconfigMapGenerator: []' }, /namespace, configMapGenerator not supported/],
    [{ 'kustomization.yaml': 'labels: [{ pairs: { a: b }, includeSelectors: true }]' }, /includeSelectors is not supported/],
    [{ 'kustomization.yaml': 'resources: [../base]' }, /resource \.\.\/base: only YAML files/],
    [{ 'kustomization.yaml': 'resources: [https://example.com/x.yaml]' }, /only YAML files/],
    [{ 'kustomization.yaml': 'resources: [bad.yaml]', 'bad.yaml': 'a: [' }, /^bad\.yaml: /],
    [{ 'kustomization.yaml': 'resources: [' }, /^kustomization\.yaml: /],
    [{ 'kustomization.yaml': '' }, /^kustomization\.yaml: empty/],
  ]
  for (const [files, message] of refused) {
    const dir = await kustomizationDir(t, files)
    await t.rejects(renderKustomization(dir), message, JSON.stringify(files))
  }
})
