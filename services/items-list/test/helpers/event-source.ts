import { request } from 'node:http'
import type { IncomingMessage } from 'node:http'
import type { FastifyInstance } from 'fastify'

/** One Server-Sent Event as a client reads it. */
export interface ReceivedEvent {
  id: string
  event: string
  data: unknown
}

export interface OpenedStream {
  status: number
  headers: IncomingMessage['headers']
  events: ReceivedEvent[]
  /** The body as read (for an answer that is not a stream). */
  text: () => string
  /** Resolves once `predicate` holds for the events read so far; rejects after `ms`. */
  until(predicate: (events: ReceivedEvent[]) => boolean, ms?: number): Promise<void>
  /** Resolves when the server ends the stream. */
  ended: Promise<void>
  response: IncomingMessage
  close(): void
}

/** The address a listening app answers on. */
export async function listening(app: FastifyInstance): Promise<string> {
  if (!app.server.listening) await app.listen({ port: 0, host: '127.0.0.1' })
  const address = app.server.address()
  if (address === null || typeof address === 'string') throw new Error('not listening on a port')
  return `http://127.0.0.1:${address.port}`
}

/** Opens `GET url` over a real socket and parses its events as they come (as EventSource does). */
export function openStream(url: string, headers: Record<string, string> = {}): Promise<OpenedStream> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: { accept: 'text/event-stream', ...headers } }, (response) => {
      const events: ReceivedEvent[] = []
      let buffer = ''
      let body = ''
      const waiters = new Set<() => void>()
      response.setEncoding('utf8')
      response.on('data', (chunk: string) => {
        body += chunk
        buffer += chunk
        let end: number
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const frame = buffer.slice(0, end)
          buffer = buffer.slice(end + 2)
          const fields: Record<string, string> = {}
          for (const line of frame.split('\n')) {
            if (line.startsWith(':')) continue
            const colon = line.indexOf(':')
            fields[line.slice(0, colon)] = line.slice(colon + 2)
          }
          if (fields.event !== undefined) events.push({ id: fields.id ?? '', event: fields.event, data: JSON.parse(fields.data ?? 'null') })
        }
        for (const waiter of waiters) waiter()
      })
      const ended = new Promise<void>((done) => response.once('close', () => done()))
      resolve({
        status: response.statusCode ?? 0,
        headers: response.headers,
        events,
        text: () => body,
        response,
        ended,
        until(predicate, ms = 10_000) {
          return new Promise<void>((done, fail) => {
            const check = () => {
              try {
                if (!predicate(events)) return
              } catch (error) {
                // The events broke a strict copy: that is the answer.
                clearTimeout(timer)
                waiters.delete(check)
                fail(error instanceof Error ? error : new Error(String(error)))
                return
              }
              clearTimeout(timer)
              waiters.delete(check)
              done()
            }
            const timer = setTimeout(() => {
              waiters.delete(check)
              fail(new Error(`events never reached the expected state: ${JSON.stringify(events.slice(-5))}`))
            }, ms)
            waiters.add(check)
            check()
          })
        },
        close: () => req.destroy(),
      })
    })
    req.on('error', reject)
    req.end()
  })
}

/**
 * A client's copy of the list: what applying the events in order gives. Strict: an append of a
 * position the copy holds, or a remove of one it does not, is an event sent twice or out of
 * order, and throws.
 */
export function applyEvents(events: readonly ReceivedEvent[]): string[] {
  const copy = new Map<string, string>()
  for (const { id, event, data } of events) {
    if (event === 'reset') copy.clear()
    else if (event === 'append') {
      const { name, at } = data as { name: string; at: string }
      if (copy.has(at)) throw new Error(`${id}: append of ${at}, already held`)
      copy.set(at, name)
    } else if (event === 'remove') {
      for (const at of (data as { at: string[] }).at) {
        if (!copy.delete(at)) throw new Error(`${id}: remove of ${at}, not held`)
      }
    }
  }
  return [...copy.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, name]) => name)
}

/** The number of events of `type`. */
export const count = (events: readonly ReceivedEvent[], type: string) => events.filter(({ event }) => event === type).length
