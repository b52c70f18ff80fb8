import type { KubernetesObject } from './render.ts'

interface Model {
  validate(): void
}
type ModelClass = new (data: KubernetesObject) => Model

/**
 * Validates every object against the Kubernetes OpenAPI schema of its apiVersion and kind, with
 * the validators `kubernetes-models` generates from it: types, enums, required fields and formats.
 * (The OpenAPI schema allows unknown fields; the API server's strict field validation does not.)
 */
export async function schemaProblems(objects: readonly KubernetesObject[]): Promise<string[]> {
  const problems: string[] = []
  for (const object of objects) {
    const where = `${object.kind}/${object.metadata.name}`
    // Core objects are `v1`, the others `group/version`: both are paths of the package.
    const models = (await import(`kubernetes-models/${object.apiVersion}`).catch(() => ({}))) as Record<string, ModelClass | undefined>
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
