import t from 'tap'
import { configurationDocProblems, readConfigurationDoc } from '@repo/test-support'
import { ItemsListConfig } from '../src/config.ts'

// docs/configuration.md lists every variable of the schema, with its default and description.
t.test('docs/configuration.md documents every variable items-list reads, as its schema declares it', async (t) => {
  t.same(configurationDocProblems(ItemsListConfig, 'items-list', readConfigurationDoc()), [])
})
