import t from 'tap'
import { testProductionBundle } from '@repo/test-support'
import { ForgeAggregatorConfig } from '../src/config.ts'
import { startLocalUpstream, type LocalUpstream } from './helpers/local-upstream.ts'
import { answerRepository, REPOSITORY_COUNTS } from './helpers/repository-upstream.ts'

const DEFAULT_USER = ForgeAggregatorConfig.properties.FORGE_DEFAULT_USER.default as string
let upstream: LocalUpstream

await testProductionBundle(t, {
  service: 'forge-aggregator',
  defaultPort: ForgeAggregatorConfig.properties.PORT.default as number,
  endpoint: 'a repository from the upstream',
  async dependencies(t) {
    upstream = await startLocalUpstream(t, answerRepository(DEFAULT_USER))
    return { FORGE_API_URL: upstream.url }
  },
  async checkEndpoint(t, base) {
    const counts = await fetch(`${base}/api/forge/repos?repo_name=hello-world`)
    t.equal(counts.status, 200)
    t.same(await counts.json(), REPOSITORY_COUNTS)
    t.same(
      upstream.requests.map((request) => request.url),
      [`/repos/${DEFAULT_USER}/hello-world`],
      'one upstream call, for the default user',
    )
  },
})
