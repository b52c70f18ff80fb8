import t, { type Test } from 'tap'
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { metricsFindings, runPromtool, whyNoPromtool } from '../src/promtool.ts'

/**
 * An executable that answers as promtool does (exit code, findings on stderr), so that what is
 * made of its answers is tested on machines without promtool too.
 */
async function fakePromtool(t: Test, script: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'promtool-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const path = join(dir, 'promtool')
  await writeFile(path, `#!/bin/sh\n${script}\n`)
  await chmod(path, 0o755)
  return path
}

t.test('without promtool, its tests are skipped saying why, except in CI where that is an error', async (t) => {
  t.equal(await whyNoPromtool('no-such-promtool', {}), 'no no-such-promtool here (apt-get install prometheus)')
  await t.rejects(whyNoPromtool('no-such-promtool', { CI: 'true' }), /no no-such-promtool here \(apt-get install prometheus\), and CI requires it/)
})

t.test('a promtool that answers --version is found; one that fails it twice is an error that says what it answered', async (t) => {
  t.equal(await whyNoPromtool(await fakePromtool(t, 'exit 0'), { CI: 'true' }), false)
  await t.rejects(whyNoPromtool(await fakePromtool(t, 'echo "cannot start" >&2; exit 1'), {}), /promtool is installed but does not answer --version \(exit code 1: cannot start\)/)
})

t.test('a promtool that is there but cannot be started is an error that says why, not a skip', async (t) => {
  const notExecutable = await fakePromtool(t, 'exit 0')
  await chmod(notExecutable, 0o644)
  await t.rejects(whyNoPromtool(notExecutable, {}), /promtool is installed but does not answer --version \(Error: spawn .* EACCES\)/)
})

t.test('a promtool that fails --version once and answers the second time is found', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'promtool-tries-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const flaky = await fakePromtool(t, `if [ -e ${dir}/tried ]; then exit 0; fi; touch ${dir}/tried; exit 2`)
  t.equal(await whyNoPromtool(flaky, { CI: 'true' }), false)
})

t.test('a promtool that cannot be started is an error, not an empty answer', async (t) => {
  await t.rejects(runPromtool(['--version'], undefined, 'no-such-promtool'), { code: 'ENOENT' })
})

t.test('runPromtool passes the arguments and the input, and gives back the exit code and all output', async (t) => {
  const echo = await fakePromtool(t, 'echo "args: $*"; cat >&2; exit 3')
  t.same(await runPromtool(['check', 'metrics'], 'the page\n', echo), { code: 3, output: 'args: check metrics\nthe page\n' })
})

t.test('metricsFindings: one finding per line promtool writes, blank lines dropped', async (t) => {
  const linter = await fakePromtool(t, 'cat >/dev/null; printf "a_total non-counter metrics should not have \\"_total\\" suffix\\n\\nb no help text\\n" >&2; exit 3')
  t.same(await metricsFindings('a_total 1\n', linter), ['a_total non-counter metrics should not have "_total" suffix', 'b no help text'])
})

t.test('the real promtool: a page that lints clean has no findings, a gauge named _total has one', { skip: await whyNoPromtool() }, async (t) => {
  t.same(await metricsFindings('# HELP up_total Things done\n# TYPE up_total counter\nup_total 1\n'), [])
  t.same(await metricsFindings('# HELP done_total Things done\n# TYPE done_total gauge\ndone_total 1\n'), ['done_total non-counter metrics should not have "_total" suffix'])
})

t.test('a promtool that exits without reading its input answers with its exit code, not a broken pipe', async (t) => {
  const quitter = await fakePromtool(t, 'echo "error while linting" >&2; exit 1')
  t.same(await runPromtool(['check', 'metrics'], 'x'.repeat(1 << 20), quitter), { code: 1, output: 'error while linting\n' })
})
