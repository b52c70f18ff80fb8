import { createPrivateKey, type KeyObject } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { ConfigError } from '@repo/config'
import type { ForgeAggregatorConfig } from '../config.ts'

/**
 * How the service authenticates upstream, as the configuration says (docs/github-app.md): read
 * and checked once at start-up, and the identity the shared cache's namespace is made of.
 */

/** A GitHub App installation the service calls as (docs/design.md, "GitHub App"). */
export interface AppCredentials {
  appId: string
  installationId: string
  privateKey: KeyObject
}

/**
 * A public GitHub App (`FORGE_APP_PUBLIC=true`, docs/github-app.md, "A public App"): every account
 * that installed it is called about with its own installation's token; the others, and `repos`,
 * with the default installation's, or anonymously without one.
 */
export interface PublicAppCredentials {
  appId: string
  privateKey: KeyObject
  /** `FORGE_APP_INSTALLATION_ID`, optional in this mode. */
  defaultInstallationId: string | undefined
}

/** How the service authenticates upstream: not at all, with a personal token, as one App installation, or as a public App. */
export type UpstreamCredentials =
  | { kind: 'anonymous' }
  | { kind: 'token'; token: string }
  | ({ kind: 'app' } & AppCredentials)
  | ({ kind: 'public-app' } & PublicAppCredentials)

/**
 * Whom the upstream answers, as the shared cache's namespace tells deployments apart: the token
 * (only ever hashed there), a GitHub App's installation (app and installation id, not its token,
 * which changes every hour: a renewal keeps every answer, held projection and the budget; docs/design.md,
 * "GitHub App"), or nobody.
 */
export function callerOf(credentials: UpstreamCredentials): string | null {
  if (credentials.kind === 'token') return credentials.token
  // A public App's answers are the same whichever installation paid for them: one namespace for the App.
  if (credentials.kind === 'public-app') return `app:${credentials.appId}:public:${credentials.defaultInstallationId ?? ''}`
  return credentials.kind === 'app' ? `app:${credentials.appId}:${credentials.installationId}` : null
}

type CredentialSettings = Pick<
  ForgeAggregatorConfig,
  'FORGE_TOKEN' | 'FORGE_APP_ID' | 'FORGE_APP_INSTALLATION_ID' | 'FORGE_APP_PRIVATE_KEY' | 'FORGE_APP_PRIVATE_KEY_FILE' | 'FORGE_APP_PUBLIC'
>

const APP_VARIABLES = ['FORGE_APP_ID', 'FORGE_APP_INSTALLATION_ID', 'FORGE_APP_PRIVATE_KEY', 'FORGE_APP_PRIVATE_KEY_FILE'] as const

/**
 * The credentials the configuration describes, the App's key read (from its file) and parsed once
 * at start-up. The App's variables go together and exclude `FORGE_TOKEN`: throws `ConfigError`
 * with one line per problem, naming the variables and never showing a value.
 */
export function credentialsFrom(config: Readonly<CredentialSettings>, readKeyFile: (path: string) => string = (path) => readFileSync(path, 'utf8')): UpstreamCredentials {
  if (config.FORGE_APP_PUBLIC === true) return publicAppCredentials(config, readKeyFile)
  const given = APP_VARIABLES.filter((name) => config[name] !== undefined)
  if (given.length === 0) return config.FORGE_TOKEN === undefined ? { kind: 'anonymous' } : { kind: 'token', token: config.FORGE_TOKEN }

  const problems: string[] = []
  const named = given.join(', ')
  if (config.FORGE_TOKEN !== undefined) problems.push(`FORGE_TOKEN must not be set with ${named}: use a personal token or a GitHub App, not both`)
  for (const name of ['FORGE_APP_ID', 'FORGE_APP_INSTALLATION_ID'] as const) {
    if (config[name] === undefined) problems.push(`${name} must be set with ${named}: a GitHub App needs its id, its installation id and its private key`)
  }
  const privateKey = readPrivateKey(config, named, readKeyFile, problems)
  if (problems.length > 0 || !privateKey) throw new ConfigError(problems)
  return { kind: 'app', appId: config.FORGE_APP_ID!, installationId: config.FORGE_APP_INSTALLATION_ID!, privateKey }
}

/** `FORGE_APP_PUBLIC=true`: the App's id and key are needed, the installation id is the optional default. */
function publicAppCredentials(config: Readonly<CredentialSettings>, readKeyFile: (path: string) => string): UpstreamCredentials {
  const problems: string[] = []
  const named = 'FORGE_APP_PUBLIC=true'
  if (config.FORGE_TOKEN !== undefined) problems.push(`FORGE_TOKEN must not be set with ${named}: use a personal token or a GitHub App, not both`)
  if (config.FORGE_APP_ID === undefined) problems.push(`FORGE_APP_ID must be set with ${named}: a public GitHub App needs its id and its private key`)
  const privateKey = readPrivateKey(config, named, readKeyFile, problems)
  if (problems.length > 0 || !privateKey) throw new ConfigError(problems)
  return { kind: 'public-app', appId: config.FORGE_APP_ID!, privateKey, defaultInstallationId: config.FORGE_APP_INSTALLATION_ID }
}

function readPrivateKey(config: Readonly<CredentialSettings>, named: string, readKeyFile: (path: string) => string, problems: string[]): KeyObject | undefined {
  const { FORGE_APP_PRIVATE_KEY: inline, FORGE_APP_PRIVATE_KEY_FILE: file } = config
  if (inline !== undefined && file !== undefined) {
    problems.push('FORGE_APP_PRIVATE_KEY and FORGE_APP_PRIVATE_KEY_FILE are both set: give the key one way')
    return undefined
  }
  if (inline === undefined && file === undefined) {
    problems.push(`FORGE_APP_PRIVATE_KEY or FORGE_APP_PRIVATE_KEY_FILE must be set with ${named}: a GitHub App needs its private key`)
    return undefined
  }
  const name = inline === undefined ? 'FORGE_APP_PRIVATE_KEY_FILE' : 'FORGE_APP_PRIVATE_KEY'
  let pem: string
  try {
    pem = inline ?? readKeyFile(file!)
  } catch (error) {
    problems.push(`FORGE_APP_PRIVATE_KEY_FILE could not be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`)
    return undefined
  }
  // An orchestrator's one-line variable often carries the PEM's line breaks as `\n`.
  if (!pem.includes('\n')) pem = pem.replaceAll('\\n', '\n')
  try {
    const key = createPrivateKey(pem)
    if (key.asymmetricKeyType === 'rsa') return key
  } catch {
    // What the parser says about a key could quote it: the line below is all that is said.
  }
  problems.push(`${name} must be an RSA private key in PEM (the .pem file GitHub gives for the App)`)
  return undefined
}
