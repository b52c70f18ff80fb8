import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { Agent, request } from 'undici'
import type { ServiceName } from './stack.ts'

/** What the clients saw, once stopped. */
export interface LoadOutcome {
  requests: number
  /** Every answer that was not the expected one, and every request that got no answer. */
  failures: string[]
  /** The names items-list answered 201, each appended once with its own Idempotency-Key. */
  appended: string[]
}

export interface Load {
  stop(): Promise<LoadOutcome>
}

/**
 * Clients that never retry, each on one keep-alive connection at a time, sending its next
 * request only once the last is answered: on items-list an append with an Idempotency-Key, then
 * a read of the list, in turn; on the aggregator `users` for one of a few logins.
 */
export function startLoad(urls: Readonly<Record<ServiceName, string>>, clientsPerService = 3): Load {
  const outcome: LoadOutcome = { requests: 0, failures: [], appended: [] }
  let stopped = false
  const failed = (what: string) => outcome.failures.push(`${new Date().toISOString()} ${what}`)

  async function itemsClient(index: number, agent: Agent) {
    for (let n = 0; !stopped; n++) {
      const name = `load-${index}-${n}`
      try {
        const appended = await request(`${urls['items-list']}/items/`, {
          method: 'POST',
          dispatcher: agent,
          headers: { 'content-type': 'application/json', 'idempotency-key': randomUUID() },
          body: JSON.stringify({ name }),
        })
        await appended.body.dump()
        outcome.requests++
        if (appended.statusCode === 201) outcome.appended.push(name)
        else failed(`POST ${name}: ${appended.statusCode}`)
        const listed = await request(`${urls['items-list']}/items/`, { dispatcher: agent })
        await listed.body.dump()
        outcome.requests++
        if (listed.statusCode !== 200) failed(`GET /items/: ${listed.statusCode}`)
      } catch (error) {
        failed(`items-list: ${String(error)}`)
      }
      await sleep(5)
    }
  }

  async function aggregatorClient(index: number, agent: Agent) {
    for (let n = 0; !stopped; n++) {
      const login = `load-user-${(index * 7 + n) % 10}`
      try {
        const answer = await request(`${urls['forge-aggregator']}/api/forge/users?user_name=${login}`, { dispatcher: agent })
        const body = await answer.body.text()
        outcome.requests++
        const ok = answer.statusCode === 200 && (JSON.parse(body) as { user?: { login?: string } }).user?.login === login
        if (!ok) failed(`GET users ${login}: ${answer.statusCode}`)
      } catch (error) {
        failed(`forge-aggregator: ${String(error)}`)
      }
      await sleep(5)
    }
  }

  const agents: Agent[] = []
  const clients: Promise<void>[] = []
  for (let index = 0; index < clientsPerService; index++) {
    for (const client of [itemsClient, aggregatorClient]) {
      const agent = new Agent({ connections: 1, keepAliveTimeout: 30_000 })
      agents.push(agent)
      clients.push(client(index, agent))
    }
  }
  return {
    async stop() {
      stopped = true
      await Promise.all(clients)
      await Promise.all(agents.map((agent) => agent.close()))
      return outcome
    },
  }
}
