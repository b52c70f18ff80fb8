// A request written byte for byte on a raw connection, for the tests of what no HTTP client would
// send (bad framing, oversized headers, a path a client would normalize).
import { once } from 'node:events'
import { connect } from 'node:net'

/** What a server sent back on a raw connection, up to its close. */
export interface RawAnswer {
  /** The status code of the status line (NaN when there was none). */
  status: number
  /** The header fields, names lower-cased (a repeated name keeps its last value). */
  headers: Record<string, string>
  /** The body, as sent. */
  body: string
}

/**
 * Writes `request` as is (bytes an HTTP client would refuse to send: bad framing, oversized
 * headers) to 127.0.0.1:`port`, and resolves with what the server answered once it closes the
 * connection. Only what the server sends counts: a reset after its answer (which a client still
 * writing may get) is not an error.
 */
export async function exchangeRaw(port: number, request: string | Buffer): Promise<RawAnswer> {
  const socket = connect(port, '127.0.0.1')
  const chunks: Buffer[] = []
  socket.on('data', (chunk: Buffer) => chunks.push(chunk))
  socket.on('error', () => {})
  // Not events.once on 'close' alone: 'error' would make it reject.
  const closed = new Promise((resolve) => socket.on('close', resolve))
  await once(socket, 'connect')
  socket.write(request)
  await closed
  const text = Buffer.concat(chunks).toString('latin1')
  const split = text.indexOf('\r\n\r\n')
  const [statusLine = '', ...fields] = (split === -1 ? text : text.slice(0, split)).split('\r\n')
  const headers: Record<string, string> = {}
  for (const field of fields) {
    const colon = field.indexOf(':')
    headers[field.slice(0, colon).trim().toLowerCase()] = field.slice(colon + 1).trim()
  }
  const body = split === -1 ? '' : Buffer.from(text.slice(split + 4), 'latin1').toString('utf8')
  return { status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1]), headers, body }
}
