import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { once } from 'node:events'
import type { Test } from 'tap'

export interface LocalUpstream {
  url: string
  /** Requests received, in order. */
  requests: IncomingMessage[]
  server: Server
}

/**
 * A real HTTP server on 127.0.0.1 for what nock cannot fake faithfully: bodies cut short,
 * sockets reset, answers that never come. Closed at the end of `t`.
 */
export async function startLocalUpstream(
  t: Test,
  handle: (request: IncomingMessage, response: ServerResponse, index: number) => void,
): Promise<LocalUpstream> {
  const requests: IncomingMessage[] = []
  const server = createServer((request, response) => {
    requests.push(request)
    handle(request, response, requests.length - 1)
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => {
    server.closeAllConnections()
    server.close()
  })
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('no TCP address')
  return { url: `http://127.0.0.1:${address.port}`, requests, server }
}
