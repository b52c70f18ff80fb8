import { runService } from '@repo/service-kit'
import { buildApp } from './app.ts'
import { ItemsListConfig } from './config.ts'

await runService({ config: ItemsListConfig, env: process.env, start: buildApp })
