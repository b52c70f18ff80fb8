import { createHash } from 'node:crypto'
import type { TSchema } from '@sinclair/typebox'
import type { TypeCheck } from '@sinclair/typebox/compiler'
import { Value } from '@sinclair/typebox/value'

/**
 * What of an upstream body is kept (docs/design.md, "Held projections"): the fields its check
 * names, nothing else. A repository object from GitHub is about 6 KB, of which the answers read
 * about ten fields.
 */
export interface Projection {
  /**
   * The fingerprint of the check's schema. A projection is only whole for the schema that made
   * it: one made for another (a version of the service reading more fields) lacks fields that
   * this one may read as absent, so it must never be read as this one's.
   */
  shape: string
  /** `body`, which passed the check, stripped of every field the schema does not name (in place). */
  project<Body>(body: Body): Body
}

const projections = new WeakMap<TypeCheck<TSchema>, Projection>()

/** The projection of the bodies `check` passes; made once per check. */
export function projectionOf(check: TypeCheck<TSchema>): Projection {
  let projection = projections.get(check)
  if (!projection) {
    const schema = check.Schema()
    const references = check.References()
    projection = {
      shape: createHash('sha256').update(JSON.stringify(schema)).digest('base64url').slice(0, 16),
      project: <Body>(body: Body) => Value.Clean(schema, references, body) as Body,
    }
    projections.set(check, projection)
  }
  return projection
}
