import type { IncomingMessage, ServerResponse } from 'node:http'
import repository from '../fixtures/repository.json' with { type: 'json' }
import recordedHeaders from '../fixtures/headers.json' with { type: 'json' }

/** What the service answers for the official repository example. */
export const REPOSITORY_COUNTS = { stars: repository.stargazers_count, forksCount: repository.forks_count }

/**
 * A `startLocalUpstream` handler answering GET /repos/{owner}/{repo} with the official example
 * (named after the repo) and recorded headers, once `until` resolves; anything else is a 404. For
 * tests that run the service as a process, which nock cannot reach.
 */
export function answerRepository(owner: string, until: Promise<unknown> = Promise.resolve()) {
  const path = new RegExp(`^/repos/${owner}/([^/?]+)$`)
  return (request: IncomingMessage, response: ServerResponse): void => {
    const match = path.exec(request.url ?? '')
    void until.then(() => {
      if (!match?.[1]) {
        response.writeHead(404, { 'content-type': 'application/json; charset=utf-8' }).end('{"message":"Not Found"}')
        return
      }
      const name = decodeURIComponent(match[1])
      const body = { ...repository, name, full_name: `${owner}/${name}` }
      response.writeHead(200, recordedHeaders.resource).end(JSON.stringify(body))
    })
  }
}
