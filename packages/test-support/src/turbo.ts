import { readFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'

const TURBO_JSON = fileURLToPath(new URL('../../../turbo.json', import.meta.url))

/**
 * The variables `pnpm start` at the repository root hands the services: turbo's strict env mode
 * passes a task only those its `passThroughEnv` lists, and silently drops the rest.
 */
export async function rootStartEnv(): Promise<string[]> {
  const turbo = JSON.parse(await readFile(TURBO_JSON, 'utf8')) as { tasks: { start?: { passThroughEnv?: string[] } } }
  return turbo.tasks.start?.passThroughEnv ?? []
}
