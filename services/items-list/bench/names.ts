/** The 100 names the list holds at the start of every measurement. */
export const PREFILLED_NAMES = Array.from({ length: 100 }, (_, index) => `bench item number ${index}`)

/** The body every benchmarked POST sends. */
export const NEW_ITEM = { name: 'benchmarked item' }
