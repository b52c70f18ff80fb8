import { fileURLToPath } from 'node:url'
import t from 'tap'
import { runServiceSource } from '@repo/test-support'

const PACKAGE_ROOT = fileURLToPath(new URL('../..', import.meta.url))

function writeLines(lines: number, then: 'exit' | 'throw' | 'stay') {
  return runServiceSource(PACKAGE_ROOT, { LINES: String(lines), THEN: then }, 'test/fixtures/log-lines.ts')
}

/** The `i` of every log line in the output, in the order written. */
function written(output: string): number[] {
  return output
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => (JSON.parse(line) as { i: number }).i)
}

const upTo = (count: number) => Array.from({ length: count }, (_, i) => i)

t.test('every line reaches stdout whole and in order, the last batch when the process exits', async (t) => {
  // 300 lines are several 4 KB batches and a partial one, which only the exit writes.
  const writer = writeLines(300, 'exit')
  t.equal(await writer.exited, 0)
  t.same(written(writer.output()), upTo(300))
})

t.test('the lines still waiting are written when the process dies of an uncaught error', async (t) => {
  const writer = writeLines(3, 'throw')
  t.equal(await writer.exited, 1)
  t.same(written(writer.output()), upTo(3))
})

t.test('a line written alone does not wait for a batch to fill: it is written within about a second', async (t) => {
  const writer = writeLines(1, 'stay')
  t.teardown(() => writer.child.kill())
  // From the first line's write, not from the spawn: a start on a crowded machine took longer than 5 s.
  await writer.waitFor(/^started$/m)
  await writer.waitFor(/"i":0/, 5_000)
  t.same(written(writer.output()), [0])
})
