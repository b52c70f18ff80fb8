import t from 'tap'
import { upstreamPath } from '../../src/upstream/endpoint.ts'

t.test('upstreamPath percent-encodes every interpolated value as one segment', async (t) => {
  t.equal(upstreamPath`/repos/${'a b'}/${'c/d?e#f'}`, '/repos/a%20b/c%2Fd%3Fe%23f')
  t.equal(upstreamPath`/users/${'mona'}/repos`, '/users/mona/repos')
})

t.test('upstreamPath refuses segments that would change the path: empty, . and ..', async (t) => {
  for (const segment of ['', '.', '..']) {
    t.throws(() => upstreamPath`/repos/octocat/${segment}`, TypeError, JSON.stringify(segment))
  }
})
