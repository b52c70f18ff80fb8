export { LISTENING, eventually, isListening, nodePath, runProcess, runServiceSource, waitForStatus, type RunningProcess } from './process.ts'
export { testProductionBundle, type BundleCheck } from './production-bundle.ts'
export { renderSwaggerUi, whyNoBrowser, CHROMIUM_PATH, type RenderedDocs } from './browser.ts'
