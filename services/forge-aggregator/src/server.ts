import { runService } from '@repo/service-kit'
import { buildApp } from './app.ts'
import { ForgeAggregatorConfig } from './config.ts'
import { exitOnConfigError } from './upstream-credentials.ts'

// buildApp's checks across variables (the GitHub App's, DESIGN §13) end the start as loadConfig's do.
await runService({ config: ForgeAggregatorConfig, env: process.env, start: buildApp }).catch(exitOnConfigError)
