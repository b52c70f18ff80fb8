import t from 'tap'
import { startPrivateRedis, testProductionBundle, waitForStatus } from '@repo/test-support'
import { ItemsListConfig } from '../src/config.ts'
import { connectInspector } from './helpers/service.ts'

await testProductionBundle(t, {
  service: 'items-list',
  defaultPort: ItemsListConfig.properties.PORT.default as number,
  endpoint: 'the list from Redis',
  async dependencies(t) {
    const redis = await startPrivateRedis()
    const inspector = await connectInspector(redis.port)
    await inspector.rPush('items', ['green apple', 'pear'])
    t.teardown(async () => {
      inspector.destroy()
      await redis.dispose()
    })
    return { REDIS_HOST: '127.0.0.1', REDIS_PORT: String(redis.port) }
  },
  async checkEndpoint(t, base) {
    await waitForStatus(`${base}/ready`, 200)
    const items = await fetch(`${base}/items/`)
    t.equal(items.status, 200)
    t.same(await items.json(), { items: ['green apple', 'pear'] })
  },
})
