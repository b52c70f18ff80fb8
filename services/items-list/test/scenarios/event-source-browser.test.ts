import t from 'tap'
import { createServer, connect, type Socket } from 'node:net'
import { launchBrowser, LENIENT_REDIS_DEADLINE_MS, whyNoBrowser } from '@repo/test-support'
import { buildService } from '../helpers/service.ts'

// A browser's own EventSource, in headless Chromium, follows the list through a replica going
// away: a proxy in front of two replicas on one Redis cuts every connection and sends the next to
// the other one, as a load balancer does when a replica restarts. The page resumes with
// Last-Event-ID by itself, and its copy ends equal to the list.

t.test("a page's EventSource keeps an exact copy of the list across a replica going away", { skip: await whyNoBrowser() }, async (t) => {
  const env = { REDIS_DEADLINE_MS: String(LENIENT_REDIS_DEADLINE_MS) }
  const first = await buildService(t, { env })
  const second = await buildService(t, { env, redis: first.redis })
  const ports = await Promise.all([first, second].map(async ({ app }) => {
    await app.listen({ host: '127.0.0.1', port: 0 })
    return (app.server.address() as { port: number }).port
  }))
  let target = ports[0]!
  const open = new Set<Socket>()
  const proxy = createServer((client) => {
    const upstream = connect(target, '127.0.0.1')
    open.add(client)
    client.once('close', () => open.delete(client))
    client.pipe(upstream).pipe(client)
    client.on('error', () => upstream.destroy())
    upstream.on('error', () => client.destroy())
    upstream.once('close', () => client.destroy())
  })
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve))
  t.teardown(() => proxy.close())
  const address = `http://127.0.0.1:${(proxy.address() as { port: number }).port}`

  const add = (name: string) => first.app.inject({ method: 'POST', url: '/items/', payload: { name } })
  for (const name of ['a', 'b', 'a']) await add(name)

  const browser = await launchBrowser()
  t.teardown(() => browser.close())
  const page = await browser.newPage()
  await page.goto(`${address}/`)
  await page.evaluate(() => {
    const state = { copy: new Map<string, string>(), opened: 0 }
    ;(globalThis as unknown as { feed: typeof state }).feed = state
    const events = new EventSource('/items/events')
    events.addEventListener('open', () => state.opened++)
    events.addEventListener('reset', () => state.copy.clear())
    events.addEventListener('append', (event) => {
      const { at, name } = JSON.parse((event as MessageEvent).data as string) as { at: string; name: string }
      state.copy.set(at, name)
    })
    events.addEventListener('remove', (event) => {
      for (const at of (JSON.parse((event as MessageEvent).data as string) as { at: string[] }).at) state.copy.delete(at)
    })
  })
  const pageList = () =>
    page.evaluate(() => {
      const { copy } = (globalThis as unknown as { feed: { copy: Map<string, string> } }).feed
      return [...copy.keys()].sort().map((at) => copy.get(at)!)
    })
  const list = async () => (await first.app.inject({ method: 'GET', url: '/items/' })).json<{ items: string[] }>().items
  const untilEqual = async () => {
    const expected = await list()
    for (let tries = 0; tries < 200; tries++) {
      if ((await pageList()).join('\n') === expected.join('\n')) return
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    t.same(await pageList(), expected)
  }
  await untilEqual()

  // The replica goes away: its connections cut, the next ones reach the other.
  target = ports[1]!
  for (const socket of open) socket.destroy()
  await add('c')
  await first.app.inject({ method: 'DELETE', url: '/items/a' })
  await add('d')
  await untilEqual()
  t.same(await pageList(), ['b', 'c', 'd'])
  const resumes = (await second.app.inject({ method: 'GET', url: '/metrics' })).body
  t.match(resumes, /^items_events_resumes_total 1$/m, 'the browser resumed on the other replica from its Last-Event-ID, with no snapshot')
})
