import t from 'tap'
import { decodeHeader, decodeIndex, HEADER_VERSION, listKeys } from '../../src/store/layout.ts'

// The list's shape: the keys every part of the store builds from ITEMS_KEY, and how what Redis
// holds is read back. The scripts and the reads rely on these agreeing.

t.test('a chunk key is found by the chunk pattern and gives back its number; no other key does', async (t) => {
  const keys = listKeys('items')
  t.equal(keys.chunk(12), 'items:chunk:12')
  t.equal(keys.chunkPattern, 'items:chunk:*')
  t.equal(keys.chunkNumber(keys.chunk(12)), 12)
  t.equal(keys.chunkNumber(keys.chunk(999_999_999)), 999_999_999)
  for (const other of ['items:chunk:', 'items:chunk:0', 'items:chunk:07', 'items:chunk:1x', 'items:chunk:-1', 'items:chunk:1.5', 'other:chunk:1', 'items:header']) {
    t.equal(keys.chunkNumber(other), undefined, `${other} is no chunk of the list`)
  }
})

t.test("a key holding the glob's own characters matches them as themselves", async (t) => {
  const keys = listKeys('list[1]*?\\')
  t.equal(keys.chunkPattern, 'list\\[1\\]\\*\\?\\\\:chunk:*')
  t.equal(keys.chunkNumber(keys.chunk(3)), 3)
})

t.test('the header decodes by field name, whatever place HEADER_VERSION gives each', async (t) => {
  const fields = HEADER_VERSION.map((field) => ({ id: 'abc', count: '3', tail: '2', fill: '7', legacy: null })[field] ?? null)
  t.same(decodeHeader(fields), { listId: 'abc', legacy: false, version: fields.join(' ') })
  const moving = HEADER_VERSION.map((field) => (field === 'legacy' ? '1' : field === 'id' ? 'abc' : '0'))
  t.match(decodeHeader(moving), { listId: 'abc', legacy: true })
  t.match(decodeHeader(HEADER_VERSION.map(() => null)), { listId: undefined, legacy: false })
})

t.test('the versions of two headers differ when any one field does', async (t) => {
  const base = HEADER_VERSION.map(() => '1')
  for (const [place, field] of HEADER_VERSION.entries()) {
    const moved = base.map((value, at) => (at === place ? '2' : value))
    t.not(decodeHeader(moved).version, decodeHeader(base).version, `${field} moved`)
  }
})

t.test("the index's members: its id, its chunks in order, the legacy marker", async (t) => {
  t.same(decodeIndex(['id:abc', '1', '3', 'legacy']), { listId: 'abc', chunks: [1, 3], legacy: true })
  t.same(decodeIndex(['4', '5']), { listId: undefined, chunks: [4, 5], legacy: false })
})
