import t from 'tap'
import { configurationDocProblems, readConfigurationDoc } from '@repo/test-support'
import { ForgeAggregatorConfig } from '../src/config.ts'

// docs/configuration.md lists every variable of the schema, with its default and description.
t.test('docs/configuration.md documents every variable forge-aggregator reads, as its schema declares it', async (t) => {
  t.same(configurationDocProblems(ForgeAggregatorConfig, 'forge-aggregator', readConfigurationDoc()), [])
})
