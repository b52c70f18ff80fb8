import t from 'tap'
import { serversInRotation } from '../src/server-states.ts'

// Lines as HAProxy 2.6 wrote them in the compose stack (docker logs: stdout, then stderr).
const resolved = (server: string) => [
  `forge-aggregator/${server} changed its IP from (none) to 172.31.240.6 by DNS cache.`,
  `Server forge-aggregator/${server} ('forge-aggregator') is UP/READY (resolves again).`,
  `Server forge-aggregator/${server} administratively READY thanks to valid DNS answer.`,
]
const refused = (server: string) =>
  `Server forge-aggregator/${server} is DOWN, reason: Layer4 connection problem, info: "Connection refused", check duration: 0ms. 2 active and 0 backup servers left. 0 sessions active, 0 requeued, 0 remaining in queue.`
const checkedUp = (server: string) =>
  `Server forge-aggregator/${server} is UP, reason: Layer7 check passed, code: 200, check duration: 5ms. 2 active and 0 backup servers online. 0 sessions requeued, 0 total in queue.`
const draining = (server: string) =>
  `Server forge-aggregator/${server} is DOWN, reason: Layer7 wrong status, code: 503, info: "Service Unavailable", check duration: 7ms. 1 active and 0 backup servers left. 1 sessions active, 0 requeued, 0 remaining in queue.`
const log = (...lines: (string | string[])[]) => lines.flat().join('\n') + '\n'

t.test('a server resolved after its replica listens is UP without a check ever logging it', async (t) => {
  t.equal(serversInRotation(log(resolved('forge-aggregator-1')), 'forge-aggregator'), 1)
})

t.test('a server resolved before its replica listens counts once its checks bring it back', async (t) => {
  const lines = [resolved('forge-aggregator-2'), refused('forge-aggregator-2')]
  t.equal(serversInRotation(log(...lines), 'forge-aggregator'), 0, 'refused by its first checks: out')
  t.equal(serversInRotation(log(...lines, checkedUp('forge-aggregator-2')), 'forge-aggregator'), 1, 'checks passed: in')
})

t.test('each server counts by its last change: draining or gone to maintenance takes it out', async (t) => {
  const three = [resolved('forge-aggregator-1'), resolved('forge-aggregator-2'), resolved('forge-aggregator-3')]
  t.equal(serversInRotation(log(...three), 'forge-aggregator'), 3)
  t.equal(serversInRotation(log(...three, draining('forge-aggregator-2')), 'forge-aggregator'), 2, 'one drains')
  const maintenance = 'Server forge-aggregator/forge-aggregator-3 is going DOWN for maintenance (No IP for server). 1 active and 0 backup servers left.'
  t.equal(serversInRotation(log(...three, draining('forge-aggregator-2'), maintenance), 'forge-aggregator'), 1, 'another lost its address')
  t.equal(serversInRotation(log(...three, draining('forge-aggregator-2'), checkedUp('forge-aggregator-2')), 'forge-aggregator'), 3, 'the drained one is back')
})

t.test('only the backend asked about, and only the raw log lines, not the same news on stderr', async (t) => {
  const items = "Server items-list/items-list-1 ('items-list') is UP/READY (resolves again)."
  const stderr = `[WARNING]  (8) : ${checkedUp('forge-aggregator-1')}`
  t.equal(serversInRotation(log(items, draining('forge-aggregator-1'), stderr), 'forge-aggregator'), 0)
  t.equal(serversInRotation(log(items, draining('forge-aggregator-1'), stderr), 'items-list'), 1)
  t.equal(serversInRotation(log(items, draining('forge-aggregator-1'), stderr), 'forge'), 0, 'a prefix of a backend’s name is not that backend')
})

t.test('a backend whose name starts another’s counts only its own servers: items is not items-list', async (t) => {
  const up = (backend: string, server: string) => `Server ${backend}/${server} ('${backend}') is UP/READY (resolves again).`
  const lines = log(up('items', 'items-1'), up('items-list', 'items-list-1'), up('items-list', 'items-list-2'), up('items-listing', 'items-listing-1'))
  t.equal(serversInRotation(lines, 'items'), 1, 'items: its own server, none of items-list’s')
  t.equal(serversInRotation(lines, 'items-list'), 2, 'items-list: its own two, none of items-listing’s')
  t.equal(serversInRotation(lines, 'items-listing'), 1)
})
