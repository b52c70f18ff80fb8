import t from 'tap'
import fc from 'fast-check'
import { MAX_PER_PAGE, TOP_REPOS_LIMIT, countedRepos, pagesFor, pickTopRepos, sumForks, sumStars, toRepository } from '../../src/forge/aggregate.ts'
import type { UpstreamRepo } from '../../src/forge/bodies.ts'
import { makeRepo } from '../helpers/upstream.ts'

const arbitraryRepos = fc.array(
  fc.record({
    name: fc.stringMatching(/^[A-Za-z0-9._-]{1,12}$/),
    stars: fc.nat(1_000),
    forks: fc.nat(1_000),
    fork: fc.boolean(),
  }),
  { maxLength: 40 },
)

function reposFrom(shapes: { name: string; stars: number; forks: number; fork: boolean }[]): UpstreamRepo[] {
  return shapes.map(({ name, stars, forks, fork }) => makeRepo('mona', name, { stargazers_count: stars, forks_count: forks, fork }))
}

t.test('totalStars counts the stars of repositories that are not forks; totalForks counts every fork', async () => {
  fc.assert(
    fc.property(arbitraryRepos, (shapes) => {
      const repos = reposFrom(shapes)
      const ownStars = shapes.filter((shape) => !shape.fork).reduce((sum, shape) => sum + shape.stars, 0)
      const allForks = shapes.reduce((sum, shape) => sum + shape.forks, 0)
      return sumStars(repos) === ownStars && sumForks(repos) === allForks
    }),
  )
})

t.test('topRepos is the first 10 of the list ordered by stars descending, ties by name', async () => {
  fc.assert(
    fc.property(arbitraryRepos, (shapes) => {
      const top = pickTopRepos(reposFrom(shapes))
      const expected = [...shapes]
        .sort((a, b) => b.stars - a.stars || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
        .slice(0, TOP_REPOS_LIMIT)
      return (
        top.length === Math.min(shapes.length, TOP_REPOS_LIMIT) &&
        top.every((repo, index) => repo.name === expected[index]?.name && repo.stargazers_count === expected[index]?.stars)
      )
    }),
  )
})

t.test('repositories without counts count as 0 stars and 0 forks', async (t) => {
  const { stargazers_count: _stars, forks_count: _forks, ...bare } = makeRepo('mona', 'bare')
  const repos: UpstreamRepo[] = [bare, { ...bare, name: 'bare-too' }]
  t.equal(sumStars(repos), 0)
  t.equal(sumForks(repos), 0)
  t.match(pickTopRepos(repos), [{ name: 'bare', stargazers_count: 0, forks_count: 0 }, { name: 'bare-too' }])
  t.match(toRepository(bare), { stars: 0, forksCount: 0 })
})

t.test('repositories without language or update time map to null', async (t) => {
  const { language: _language, updated_at: _updated, ...bare } = makeRepo('mona', 'bare')
  t.match(toRepository(bare), { language: null, updatedAt: null })
})

t.test('identical names and stars keep a stable order', async (t) => {
  const twin = makeRepo('mona', 'twin', { stargazers_count: 1 })
  t.same(pickTopRepos([twin, { ...twin }]).map((repo) => repo.name), ['twin', 'twin'])
})

t.test('private repositories are not counted', async (t) => {
  const repos = [makeRepo('mona', 'a'), makeRepo('mona', 'b', { private: true })]
  t.same(countedRepos(repos).map((repo) => repo.name), ['a'])
})

t.test('pagesFor reads every page public_repos needs, at least one, at most the limit', async (t) => {
  t.equal(pagesFor(0, 10), 1)
  t.equal(pagesFor(100, 10), 1)
  t.equal(pagesFor(101, 10), 2)
  t.equal(pagesFor(250, 10), 3)
  t.equal(pagesFor(5_000, 10), 10)
  fc.assert(
    fc.property(fc.nat(100_000), fc.integer({ min: 1, max: 100 }), (publicRepos, maxPages) => {
      const pages = pagesFor(publicRepos, maxPages)
      return pages >= 1 && pages <= maxPages && (pages === maxPages || pages * MAX_PER_PAGE >= publicRepos)
    }),
  )
})

t.test('the list mode maps to the camelCase fields and keeps nulls', async (t) => {
  const repo = makeRepo('mona', 'x', { description: null, language: null, private: true })
  t.same(toRepository(repo), {
    name: 'x',
    fullName: 'mona/x',
    description: null,
    stars: repo.stargazers_count,
    forksCount: repo.forks_count,
    language: null,
    url: 'https://github.com/mona/x',
    updatedAt: repo.updated_at,
    isPrivate: true,
  })
})
