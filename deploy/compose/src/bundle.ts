import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { parse as parseYaml } from 'yaml'
import { REPO_ROOT, type ServiceName, type Stack } from './stack.ts'

/** What a service's image holds in its working directory, read by the image's own Node. */
export interface BundleContents {
  /** Whether dist/server.js and src/ exist. */
  hasServer: boolean
  hasSources: boolean
  /** pnpm's virtual store: one `name@version[_peers]` entry per package. */
  storeEntries: string[]
  /** Every name a package of the bundle depends on (as a dependency, optional or peer): what production needs. */
  required: string[]
  /** Where each workspace package the service depends on resolves, on plain Node (no source condition). */
  workspaceResolutions: Record<string, string>
}

/** Lists /app of the service's built image (its WORKDIR), running nothing of the service. */
export async function readBundle(stack: Stack, service: ServiceName): Promise<BundleContents> {
  const workspace = (await dependencyNames(join(REPO_ROOT, 'services', service, 'package.json'), 'dependencies')).filter((name) => name.startsWith('@repo/'))
  const script = `
    import { existsSync, readdirSync, readFileSync } from 'node:fs'
    const store = readdirSync('node_modules/.pnpm').filter((entry) => entry !== 'node_modules' && entry !== 'lock.yaml')
    const required = new Set()
    for (const entry of store) {
      const at = entry.indexOf('@', 1)
      const name = entry.slice(0, at).replace('+', '/')
      const manifest = JSON.parse(readFileSync('node_modules/.pnpm/' + entry + '/node_modules/' + name + '/package.json', 'utf8'))
      for (const field of ['dependencies', 'optionalDependencies', 'peerDependencies']) for (const each of Object.keys(manifest[field] ?? {})) required.add(each)
    }
    const workspaceResolutions = Object.fromEntries(${JSON.stringify(workspace)}.map((name) => [name, import.meta.resolve(name)]))
    console.log(JSON.stringify({ hasServer: existsSync('dist/server.js'), hasSources: existsSync('src'), storeEntries: store, required: [...required], workspaceResolutions }))
  `
  const output = await stack.docker('run', '--rm', '--entrypoint', 'node', `${stack.project}-${service}`, '--input-type=module', '--eval', script)
  return JSON.parse(output) as BundleContents
}

/** A virtual-store entry as name and version: "@scope+name@1.2.3_peers" → "@scope/name", "1.2.3". */
export function packageOf(entry: string): { name: string; version: string } {
  const at = entry.indexOf('@', 1)
  return { name: entry.slice(0, at).replace('+', '/'), version: entry.slice(at + 1).split('_')[0]! }
}

/** The registry packages of the bundle (`name@version`) at a version pnpm-lock.yaml does not hold. */
export async function unlocked(contents: BundleContents): Promise<string[]> {
  const lockfile = parseYaml(await readFile(join(REPO_ROOT, 'pnpm-lock.yaml'), 'utf8')) as { packages?: Record<string, unknown> }
  const locked = new Set(Object.keys(lockfile.packages ?? {}))
  return contents.storeEntries
    .map(packageOf)
    .filter(({ version }) => !version.startsWith('file+'))
    .map(({ name, version }) => `${name}@${version}`)
    .filter((id) => !locked.has(id))
}

/**
 * The devDependencies of the service and of the repository root that the bundle holds, less
 * those production needs too: @opentelemetry/api is service-kit's, @types/node protobufjs's.
 */
export async function devDependenciesIn(contents: BundleContents, service: ServiceName): Promise<string[]> {
  const manifest = join(REPO_ROOT, 'services', service, 'package.json')
  const production = new Set([...(await dependencyNames(manifest, 'dependencies')), ...contents.required])
  const installed = new Set(contents.storeEntries.map((entry) => packageOf(entry).name))
  const dev = [...(await dependencyNames(manifest, 'devDependencies')), ...(await dependencyNames(join(REPO_ROOT, 'package.json'), 'devDependencies'))]
  return [...new Set(dev.filter((name) => !production.has(name) && installed.has(name)))].sort()
}

async function dependencyNames(packageJson: string, field: 'dependencies' | 'devDependencies'): Promise<string[]> {
  const manifest = JSON.parse(await readFile(packageJson, 'utf8')) as Record<string, Record<string, string> | undefined>
  return Object.keys(manifest[field] ?? {})
}
