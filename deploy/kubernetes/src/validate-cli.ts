import { fileURLToPath } from 'node:url'
import { dataTierProblems, podProblems, secretProblems, serviceProblems, wiringProblems } from './checks.ts'
import { renderKustomization } from './render.ts'
import { schemaProblems } from './schemas.ts'
import { SERVICES } from './services.ts'

/**
 * `pnpm lint:kubernetes`: renders the base (or the kustomization directory given) and runs every
 * check that needs no running service. Prints one line per problem and exits 1 if there is any.
 */
const dir = process.argv[2] ?? fileURLToPath(new URL('..', import.meta.url))
const objects = await renderKustomization(dir)
const problems = [
  ...(await schemaProblems(objects)),
  ...wiringProblems(objects),
  ...podProblems(objects),
  ...serviceProblems(objects, SERVICES),
  ...secretProblems(objects),
  ...dataTierProblems(objects, SERVICES),
]
for (const problem of problems) console.error(problem)
console.log(`${objects.length} objects rendered, ${problems.length} problems`)
if (problems.length > 0) process.exitCode = 1
