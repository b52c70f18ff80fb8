// The JSON body parser: UTF-8 only, and no key that could reach an object's prototype, so that a
// stored name is always the one the client sent.
import { isUtf8 } from 'node:buffer'
import fp from 'fastify-plugin'

/** The parameter of a Content-Type naming its charset: `application/json; charset=latin1`. */
const CHARSET = /;\s*charset\s*=\s*"?([^";\s]*)/i
const UTF_8 = /^utf-?8$/i

/**
 * JSON bodies are UTF-8, as JSON between systems must be, or refused: a body whose bytes are not
 * valid UTF-8, or that declares another charset, is answered 400 and reaches no route. Decoding it
 * anyway would turn each bad byte into U+FFFD, and a 201 would then store a name the client never
 * sent.
 * `__proto__` and `constructor` keys are dropped (the other fields are read as sent), so that a
 * body can never reach an object's prototype.
 */
export const jsonBody = fp(
  async (app) => {
    const parseJson = app.getDefaultJsonParser('remove', 'remove')
    app.removeContentTypeParser('application/json')
    app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
      // This parser only runs for a Content-Type that names JSON.
      const charset = CHARSET.exec(request.headers['content-type']!)?.[1]
      if ((charset !== undefined && !UTF_8.test(charset)) || !isUtf8(body as Buffer)) {
        done(Object.assign(new Error('Body is not valid UTF-8 JSON'), { statusCode: 400 }), undefined)
        return
      }
      // Fastify's own parser (secure-json-parse), told to drop prototype keys; it answers through `done`.
      void parseJson(request, (body as Buffer).toString('utf8'), done)
    })
  },
  { name: 'json-body', fastify: '5.x' },
)
