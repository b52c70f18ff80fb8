import t from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import { createRedisItemStore, StoreUnavailableError } from '../src/item-store.ts'
import { pino } from 'pino'
import { silentLogger, waitUntilReady } from './helpers/build.ts'
import { startPrivateRedis } from '@repo/test-support'

const redis = await startPrivateRedis()
t.teardown(() => redis.dispose())

function openStore(key: string, deadlineMs?: number) {
  const store = createRedisItemStore({
    host: '127.0.0.1',
    port: redis.port,
    database: 0,
    key,
    logger: silentLogger,
    ...(deadlineMs === undefined ? {} : { deadlineMs }),
  })
  return store
}

t.test('removeAll reports how many occurrences it removed', async (t) => {
  const store = openStore('remove-count')
  t.teardown(() => store.close())
  await waitUntilReady(store)
  for (const name of ['a', 'b', 'a', 'a']) await store.append(name)
  t.equal(await store.removeAll('a'), 3)
  t.equal(await store.removeAll('a'), 0)
  t.same(await store.list(), ['b'])
})

t.test('the list is kept in the database REDIS_DB names', async (t) => {
  const inDb0 = openStore('db-check')
  const inDb2 = createRedisItemStore({ host: '127.0.0.1', port: redis.port, database: 2, key: 'db-check', logger: silentLogger })
  t.teardown(async () => {
    await inDb0.close()
    await inDb2.close()
  })
  await waitUntilReady(inDb2)
  await inDb2.append('only in db 2')
  t.same(await inDb0.list(), [])
  t.same(await inDb2.list(), ['only in db 2'])
})

t.test('REDIS_PASSWORD authenticates; without it a protected Redis is unavailable', async (t) => {
  const protectedRedis = await startPrivateRedis({ args: ['--requirepass', 's3cret'] })
  const withPassword = createRedisItemStore({
    host: '127.0.0.1',
    port: protectedRedis.port,
    password: 's3cret',
    database: 0,
    key: 'auth',
    logger: silentLogger,
  })
  const withoutPassword = createRedisItemStore({ host: '127.0.0.1', port: protectedRedis.port, database: 0, key: 'auth', logger: silentLogger })
  t.teardown(async () => {
    await withPassword.close()
    await withoutPassword.close()
    await protectedRedis.dispose()
  })
  await waitUntilReady(withPassword)
  await withPassword.append('allowed')
  t.same(await withPassword.list(), ['allowed'])
  await t.rejects(withoutPassword.list(), StoreUnavailableError)
})

t.test('REDIS_URL replaces host, port, password and database, and its password is never logged', async (t) => {
  const protectedRedis = await startPrivateRedis({ args: ['--requirepass', 's3cret'] })
  const lines: string[] = []
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(line) })
  const store = createRedisItemStore({
    url: `redis://:s3cret@127.0.0.1:${protectedRedis.port}/5`,
    host: 'nowhere.invalid',
    port: 1,
    database: 0,
    key: 'by-url',
    logger,
  })
  const inDb5 = createRedisItemStore({ host: '127.0.0.1', port: protectedRedis.port, password: 's3cret', database: 5, key: 'by-url', logger: silentLogger })
  t.teardown(async () => {
    await store.close()
    await inDb5.close()
    await protectedRedis.dispose()
  })
  await waitUntilReady(store)
  await store.append('via url')
  t.same(await inDb5.list(), ['via url'], 'in the database the URL names')
  t.match(lines.join(''), `"url":"redis://127.0.0.1:${protectedRedis.port}/5"`)
  t.notMatch(lines.join(''), 's3cret')
})

t.test('a command Redis does not answer within the deadline fails with StoreUnavailableError', async (t) => {
  const store = openStore('deadline', 200)
  t.teardown(() => store.close())
  await waitUntilReady(store)
  redis.pause()
  t.teardown(() => redis.resume())
  await t.rejects(store.list(), StoreUnavailableError)
  await t.rejects(store.ping(), new StoreUnavailableError('Redis did not answer within 200 ms'))
})

t.test('close gives up waiting on a Redis that stopped answering, and still closes', async (t) => {
  const store = openStore('close-hung', 100)
  await waitUntilReady(store)
  redis.pause()
  t.teardown(() => redis.resume())
  const pending = store.append('never answered').catch((error: unknown) => error)
  await sleep(10)
  await store.close()
  t.type(await pending, StoreUnavailableError)
})

t.test('closing twice is harmless', async (t) => {
  const store = openStore('close-twice')
  await waitUntilReady(store)
  await store.close()
  await t.resolves(store.close())
})

t.test('a closed store answers StoreUnavailableError', async (t) => {
  const store = openStore('closed')
  await waitUntilReady(store)
  await store.close()
  await t.rejects(store.append('late'), StoreUnavailableError)
})
