import { runService } from '@repo/service-kit'
import { buildApp } from './app.ts'
import { ForgeAggregatorConfig } from './config.ts'

await runService({ config: ForgeAggregatorConfig, env: process.env, start: buildApp })
