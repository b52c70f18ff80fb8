// Headless Chromium: Swagger UI rendered in it, for the tests that check what a browser shows of
// `/docs`; the browser itself, for a test that drives a page; and the reason they are skipped on a machine without one.
import { access, constants } from 'node:fs/promises'
import { chromium, type Browser } from 'playwright-core'

/** Debian's `chromium` package: nothing is downloaded at install time. */
const CHROMIUM_PATH = '/usr/bin/chromium'

/** A browser that never reaches the internet on its own, and needs neither a GPU nor a sandbox. */
const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
]

export interface RenderedDocs {
  /** The path of every operation Swagger UI rendered, in order. */
  operations: string[]
  /** Console errors, uncaught page errors and Content-Security-Policy violations. */
  problems: string[]
}

/**
 * Why the browser tests cannot run on this machine (the reason to skip them), or `false` when
 * they can. In CI (`CI=true`) `.ci/run` installs Chromium, and a missing browser is an error.
 */
export async function whyNoBrowser(): Promise<string | false> {
  const found = await access(CHROMIUM_PATH, constants.X_OK).then(
    () => true,
    () => false,
  )
  if (found) return false
  const reason = `no browser here: ${CHROMIUM_PATH} is missing (apt-get install chromium)`
  if (process.env.CI === 'true') throw new Error(`${reason}, and CI requires it`)
  return reason
}

/** Headless Chromium as the browser tests run it, for a test that drives a page itself; the caller closes it. */
export function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM_PATH, args: CHROMIUM_FLAGS })
}

/** Opens `docsUrl` in headless Chromium and reports what Swagger UI rendered and what went wrong. */
export async function renderSwaggerUi(docsUrl: string): Promise<RenderedDocs> {
  const browser = await launchBrowser()
  try {
    const page = await browser.newPage()
    const problems: string[] = []
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(message.text())
    })
    page.on('pageerror', (error) => problems.push(error.message))
    // A violation is always reported to the page, whether or not the browser logs it.
    await page.addInitScript({
      content: `document.addEventListener('securitypolicyviolation', (event) =>
        console.error('CSP violation: ' + event.violatedDirective + ' blocked ' + event.blockedURI))`,
    })

    await page.goto(docsUrl)
    await page.waitForSelector('.opblock-summary-path', { timeout: 20_000 })
    const operations = []
    for (const summary of await page.locator('.opblock-summary-path').all()) operations.push((await summary.getAttribute('data-path')) ?? '')
    return { operations, problems }
  } finally {
    await browser.close()
  }
}
