import { readFileSync } from 'node:fs'
import { ConfigError } from '@repo/config'
import type { ForgeAggregatorConfig } from '../config.ts'

type SecretSettings = Pick<ForgeAggregatorConfig, 'FORGE_WEBHOOK_SECRET' | 'FORGE_WEBHOOK_SECRET_FILE'>

/**
 * The webhook secret the configuration gives, inline or read from its file (a compose secret, a
 * mounted Kubernetes Secret), or undefined when webhooks are off. Both ways at once, an unreadable
 * file or an empty one stop the start (`ConfigError`, naming the variable, never the value). One
 * line break at the end of the file is not part of the secret: `echo` and editors add one.
 */
export function webhookSecretFrom(config: Readonly<SecretSettings>, readSecretFile: (path: string) => string = (path) => readFileSync(path, 'utf8')): string | undefined {
  const { FORGE_WEBHOOK_SECRET: inline, FORGE_WEBHOOK_SECRET_FILE: file } = config
  if (inline !== undefined && file !== undefined) {
    throw new ConfigError(['FORGE_WEBHOOK_SECRET and FORGE_WEBHOOK_SECRET_FILE are both set: give the secret one way'])
  }
  if (file === undefined) return inline
  let secret: string
  try {
    secret = readSecretFile(file).replace(/\r?\n$/, '')
  } catch (error) {
    throw new ConfigError([`FORGE_WEBHOOK_SECRET_FILE could not be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`])
  }
  if (secret === '') throw new ConfigError(['FORGE_WEBHOOK_SECRET_FILE is empty: the webhook secret cannot be'])
  return secret
}
