// What the tests and benchmarks of every package share: processes, private Redis servers,
// certificates, logs, raw HTTP, a browser, an OTLP receiver, the configuration doc's check.
export { LISTENING, eventually, findFreePort, isListening, nodePath, runProcess, runServiceSource, waitForStatus, type RunningProcess } from './process.ts'
export { launchBrowser, renderSwaggerUi, whyNoBrowser, type RenderedDocs } from './browser.ts'
export {
  createPrivateRedis,
  createPrivateSentinel,
  LENIENT_REDIS_DEADLINE_MS,
  startPrivateRedis,
  startPrivateSentinelGroup,
  type PrivateSentinelGroup,
  type PrivateRedis,
  type PrivateRedisOptions,
  type PrivateSentinelOptions,
} from './redis-server.ts'
export { answerWithoutLogin, composeRedisFlags, TEST_REDIS_ADMIN, TEST_REDIS_USERS, renderServiceUsersAcl, startRedisWithServiceUsers } from './redis-users.ts'
export { createTestCertificates, type TestCertificates } from './certificates.ts'
export { rootStartEnv } from './turbo.ts'
export { compareInSlices, loadFor, reportComparison, type BenchServer, type SideFigures, type SliceLoad } from './bench.ts'
export { exchangeRaw, type RawAnswer } from './raw-http.ts'
export { captureLogs, redisOutages, repeatsAnOutage, type CapturedLogs, type LogLine } from './logs.ts'
export { startOtlpReceiver, type OtlpReceiver, type OtlpSpan } from './otlp-receiver.ts'
export { configurationDocProblems, readConfigurationDoc } from './configuration-doc.ts'
