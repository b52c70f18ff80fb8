import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { pino } from 'pino'
import { LineBatches, type LineSink } from '../src/log-destination.ts'
import { createLogger } from '../src/index.ts'

function recordingSink(): LineSink & { writes: string[]; syncs: number } {
  return {
    writes: [],
    syncs: 0,
    write(data: string) {
      this.writes.push(data)
    },
    flushSync() {
      this.syncs += 1
    },
  }
}

t.test('lines wait until the batch length is reached, then leave as one write, in order', async (t) => {
  const sink = recordingSink()
  const batches = new LineBatches(sink, 10)
  batches.write('abc\n')
  batches.write('def\n')
  t.same(sink.writes, [], '8 characters wait')
  batches.write('g\n')
  t.same(sink.writes, ['abc\ndef\ng\n'], 'the 10th character sends the batch')
  batches.write('h\n')
  t.same(sink.writes, ['abc\ndef\ng\n'], 'the count starts again after a batch')
})

t.test('flush() writes what waits, then calls back; with nothing waiting it writes nothing', async (t) => {
  const sink = recordingSink()
  const batches = new LineBatches(sink, 4096)
  let called = 0
  batches.flush(() => (called += 1))
  t.same(sink.writes, [], 'no empty write')
  t.equal(called, 1)
  batches.write('one\n')
  batches.write('two\n')
  batches.flush(() => (called += 1))
  t.same(sink.writes, ['one\ntwo\n'])
  t.equal(called, 2)
  batches.flush()
  t.same(sink.writes, ['one\ntwo\n'], 'a line is written once')
})

t.test('flushSync() hands over what waits and has the sink write it before returning', async (t) => {
  const sink = recordingSink()
  const batches = new LineBatches(sink, 4096)
  batches.write('last words\n')
  batches.flushSync()
  t.same(sink.writes, ['last words\n'])
  t.equal(sink.syncs, 1)
})

t.test("a logger's lines reach a synchronous sonic-boom whole and in order, in batches", async (t) => {
  const file = join(t.testdir(), 'service.log')
  const batches = new LineBatches(pino.destination({ dest: file, sync: true }), 512)
  const logger = createLogger('info', batches)
  for (let i = 0; i < 40; i += 1) logger.info({ i }, 'request completed')
  const beforeFlush = readFileSync(file, 'utf8').split('\n').filter(Boolean).length
  t.ok(beforeFlush > 0 && beforeFlush < 40, `full batches were written at once, the rest waits (${beforeFlush} of 40)`)
  batches.flushSync()
  const lines = readFileSync(file, 'utf8').trimEnd().split('\n').map((line) => JSON.parse(line) as { i: number })
  t.same(lines.map((line) => line.i), Array.from({ length: 40 }, (_, i) => i))
})
