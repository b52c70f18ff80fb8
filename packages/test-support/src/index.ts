export { LISTENING, eventually, isListening, nodePath, runProcess, runServiceSource, waitForStatus, type RunningProcess } from './process.ts'
export { testProductionBundle, type BundleCheck } from './production-bundle.ts'
export { createPrivateRedis, startPrivateRedis, type PrivateRedis } from './redis-server.ts'
export { rootStartEnv } from './turbo.ts'
