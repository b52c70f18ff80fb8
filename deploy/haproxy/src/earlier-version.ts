import { execFile } from 'node:child_process'
import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import type { ServiceName } from './replicas.ts'

const run = promisify(execFile)
const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url))

/** An earlier version of the repository, checked out beside this one, ready to run its services. */
export interface EarlierVersion {
  /** Where `service`'s sources are in it (for `startReplica`'s `root`). */
  serviceRoot(service: ServiceName): string
  /** Removes the checkout. */
  dispose(): Promise<void>
}

/**
 * The repository at `commit` as a git worktree in a temporary directory, its dependencies
 * installed from its own lockfile (from pnpm's store, which this checkout's install filled, when
 * it holds them all; else from the registry). Rejects when this clone lacks the commit (a shallow
 * clone has no history to run).
 */
export async function checkOutEarlier(commit: string): Promise<EarlierVersion> {
  await run('git', ['-C', REPO_ROOT, 'rev-parse', '--verify', '--quiet', `${commit}^{commit}`]).catch(() => {
    throw new Error(`commit ${commit} is not in this clone: the upgrade test runs an earlier version from the repository's history`)
  })
  const dir = await mkdtemp(join(tmpdir(), 'earlier-version-'))
  await run('git', ['-C', REPO_ROOT, 'worktree', 'add', '--detach', dir, commit])
  const install = (...extra: string[]) => run('pnpm', ['install', '--frozen-lockfile', ...extra], { cwd: dir, maxBuffer: 64 * 2 ** 20 })
  await install('--offline').catch(() => install())
  return {
    serviceRoot: (service) => join(dir, 'services', service),
    async dispose() {
      await run('git', ['-C', REPO_ROOT, 'worktree', 'remove', '--force', dir])
    },
  }
}
