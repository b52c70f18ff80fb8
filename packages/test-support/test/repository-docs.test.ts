// The repository's docs, checked where every package's tests can reach them: a link in the README
// or docs/ lands on a page and heading that exist, no two headings of docs/ share a name, and a
// citation in a comment (`docs/design.md, "The Redis command deadline"`) names a heading of its page.
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { readFileSync, readdirSync } from 'node:fs'
import { dirname, join, normalize } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('../../..', import.meta.url))
const PAGES = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((name) => name.endsWith('.md')).map((name) => `docs/${name}`)]

/** A page's text without its fenced code, where `#` starts a shell comment, not a heading. */
const prose = (path: string): string => readFileSync(join(ROOT, path), 'utf8').replace(/^```[\s\S]*?^```/gm, '')
const headingsOf = (path: string): string[] => [...prose(path).matchAll(/^#{1,6} (.+)$/gm)].map(([, heading]) => heading!.replaceAll('`', '').trim())
/** The anchor GitHub gives a heading. */
const anchorOf = (heading: string): string => heading.toLowerCase().replace(/[^\p{L}\p{N} _-]/gu, '').replaceAll(' ', '-')

t.test('every relative link of the README and docs/ lands on a file, and on a heading of its page', async (t) => {
  const broken: string[] = []
  for (const page of PAGES) {
    for (const [, target] of prose(page).matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target!)) continue
      const [path, anchor] = target!.split('#') as [string, string | undefined]
      const file = path === '' ? page : normalize(join(dirname(page), path))
      let anchors: string[]
      try {
        anchors = file.endsWith('.md') ? headingsOf(file).map(anchorOf) : (readFileSync(join(ROOT, file)), [])
      } catch {
        broken.push(`${page}: ${target} (no such file)`)
        continue
      }
      if (anchor !== undefined && file.endsWith('.md') && !anchors.includes(anchor)) broken.push(`${page}: ${target} (no such heading)`)
    }
  }
  t.same(broken, [])
})

t.test('no two headings of docs/ share a name, so that a citation of one lands in one place', async (t) => {
  const seen = new Map<string, string>()
  const repeated: string[] = []
  for (const page of PAGES.filter((page) => page.startsWith('docs/'))) {
    for (const heading of headingsOf(page)) {
      const first = seen.get(heading)
      if (first !== undefined) repeated.push(`"${heading}" in ${first} and ${page}`)
      seen.set(heading, page)
    }
  }
  t.same(repeated, [])
})

t.test('every citation of a docs/ page in the code names a heading of that page', async (t) => {
  const headings = new Map(PAGES.map((page) => [page, new Set(headingsOf(page))]))
  const files = execFileSync('git', ['ls-files', '*.ts', '*.js', '*.sh', '*.yml', '*.yaml', '*.cfg', '*Dockerfile'], { cwd: ROOT, encoding: 'utf8' }).split('\n').filter(Boolean)
  const wrong: string[] = []
  let citations = 0
  for (const file of files) {
    // A citation may run over a comment's line break: join the lines, without their comment marks.
    const text = readFileSync(join(ROOT, file), 'utf8').replace(/\s*\n\s*(?:\*|#|\/\/)?\s*/g, ' ')
    for (const [, page, names] of text.matchAll(/(docs\/[\w.-]+\.md)((?:,? ?\(?(?:\\?"[^"\\$]+\\?"|\*[^*]+\*)(?:, )?)*)/g)) {
      citations++
      if (!headings.has(page!)) {
        wrong.push(`${file}: ${page} (no such page)`)
        continue
      }
      for (const [, quoted, starred] of names!.matchAll(/\\?"([^"\\]+)\\?"|\*([^*]+)\*/g)) {
        const heading = quoted ?? starred!
        if (!headings.get(page!)!.has(heading)) wrong.push(`${file}: ${page}, "${heading}" (no such heading)`)
      }
    }
  }
  t.ok(citations > 50, `${citations} citations read`)
  t.same(wrong, [])
})
