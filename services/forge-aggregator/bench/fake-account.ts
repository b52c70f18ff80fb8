/** What the fake upstream (fake-upstream.ts) holds for every login, and how it counts calls. */

export const DELAY_MS = 50
/** One page of repositories, as most accounts have: a users answer costs 5 upstream calls. */
export const REPOS_PER_USER = 30
export const FOLLOWERS_PER_USER = 20
export const ISSUES_PER_USER = 280
export const PRS_PER_USER = 42

export type RouteName = 'user' | 'repos' | 'followers' | 'search'

/**
 * Calls answered since the last reset; `notModified` of them were 304s, `troubled` answered
 * with the trouble status, `afterFirstTrouble` arrived after the first of those was answered.
 * `app` counts apart, since the fake started (a reset does not clear it: a replica mints its
 * token once, whenever its first call comes), what a GitHub App costs besides REST calls.
 */
export interface UpstreamCalls {
  total: number
  app: AppCalls
  notModified: number
  troubled: number
  afterFirstTrouble: number
  firstTroubleAnsweredAt?: number
  byRoute: Record<RouteName, number>
}

/**
 * What the App endpoints answered: installation tokens minted and installation lookups (JWT
 * calls, on the App's quota, not the installation's: never in `total`), and REST calls refused
 * 401 for want of a live installation token (those are in `total` too).
 */
export interface AppCalls {
  tokensMinted: number
  installationLookups: number
  refused: number
}
