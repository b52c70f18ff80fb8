import type { KubernetesObject } from './render.ts'

interface Model {
  validate(): void
}
type ModelClass = new (data: KubernetesObject) => Model

type Models = Record<string, ModelClass | undefined>

/**
 * The custom resources the optional components use, by apiVersion, with the models generated
 * from their CRDs. A cluster without the CRD refuses such an object, and with it the whole apply.
 */
const CUSTOM_RESOURCE_MODELS: Readonly<Record<string, () => Promise<Models>>> = {
  'monitoring.coreos.com/v1': () => import('@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1') as Promise<unknown> as Promise<Models>,
}

/**
 * Validates every object against the Kubernetes OpenAPI schema of its apiVersion and kind, with
 * the validators `kubernetes-models` generates from it: types, enums, required fields and formats.
 * (The OpenAPI schema allows unknown fields; the API server's strict field validation does not.)
 * A custom resource (the Prometheus Operator's) is validated against its CRD's schema when
 * `customResources` allows it, as for a component; otherwise, as for the base, which must apply
 * on a cluster without those CRDs, it is a problem in itself.
 */
export async function schemaProblems(objects: readonly KubernetesObject[], { customResources = false } = {}): Promise<string[]> {
  const problems: string[] = []
  for (const object of objects) {
    const where = `${object.kind}/${object.metadata.name}`
    const custom = CUSTOM_RESOURCE_MODELS[object.apiVersion]
    if (custom && !customResources) {
      problems.push(`${where}: ${object.apiVersion} needs its CustomResourceDefinition; offer it in a component, not in the base`)
      continue
    }
    // Core objects are `v1`, the others `group/version`: both are paths of the package.
    const models = custom ? await custom() : ((await import(`kubernetes-models/${object.apiVersion}`).catch(() => ({}))) as Models)
    const Model = models[object.kind]
    if (!Model) {
      problems.push(`${where}: no schema for ${object.apiVersion} ${object.kind}`)
      continue
    }
    try {
      new Model(object).validate()
    } catch (error) {
      problems.push(`${where}: ${(error as Error).message}`)
    }
  }
  return problems
}
