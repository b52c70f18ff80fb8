/** `Server <backend>/<server> [('<name>')] is UP|DOWN|going DOWN…`, at the start of a line. */
const STATE_CHANGE = /^Server (\S+)(?: \('[^']*'\))? is (UP|DOWN|going DOWN)/gm

/**
 * How many of a backend's servers HAProxy has in rotation, read from its log (the raw lines
 * `log stdout format raw` writes): each server counts by its last change of state.
 *
 * HAProxy logs two ways of coming UP. Checks bring a server back with `is UP, reason: …`. A
 * server that gets an address from DNS (`server-template` with `resolvers`) is put UP at once,
 * before its first check, with `('name') is UP/READY (resolves again)`; whether a check then
 * takes it DOWN depends on whether the replica listens yet. Reading only one of the two misses
 * replicas HAProxy is serving.
 */
export function serversInRotation(log: string, backend: string): number {
  const up = new Map<string, boolean>()
  for (const [, server, state] of log.matchAll(STATE_CHANGE)) {
    if (server!.startsWith(`${backend}/`)) up.set(server!, state === 'UP')
  }
  return [...up.values()].filter(Boolean).length
}
