/**
 * `text` parsed as JSON, or undefined when it is not JSON: for text from outside (the upstream,
 * Redis, a webhook), where "not JSON" is an answer, not an error. JSON has no `undefined`, so it
 * never stands for a value.
 */
export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown
  } catch {
    return undefined
  }
}
