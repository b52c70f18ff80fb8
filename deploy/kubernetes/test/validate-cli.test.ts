import t from 'tap'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const CLI = fileURLToPath(new URL('../src/validate-cli.ts', import.meta.url))

/** Runs `pnpm lint:kubernetes`'s command, with `args`; resolves with its exit code and output. */
async function validate(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['--conditions=@repo/source', CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const [code] = (await once(child, 'exit')) as [number | null]
  return { code, stdout, stderr }
}

t.test('the base passes every check that needs no running service', async (t) => {
  const { code, stdout, stderr } = await validate()
  t.equal(stderr, '')
  t.equal(stdout, '17 objects rendered, 0 problems\n')
  t.equal(code, 0)
})

t.test('a kustomization with problems: one line for each on stderr, exit code 1', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'kustomization-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  await writeFile(join(dir, 'kustomization.yaml'), 'resources: [leak.yaml]')
  await writeFile(join(dir, 'leak.yaml'), 'apiVersion: v1\nkind: ConfigMap\nmetadata: { name: leak }\ndata: { FORGE_TOKEN: ghp_x }\n')

  const { code, stdout, stderr } = await validate(dir)
  t.equal(stderr, [
    'forge-aggregator: no Deployment with a container of that name',
    'items-list: no Deployment with a container of that name',
    'ConfigMap/leak: FORGE_TOKEN is written in the repository',
    '',
  ].join('\n'))
  t.equal(stdout, '1 objects rendered, 3 problems\n')
  t.equal(code, 1)
})
