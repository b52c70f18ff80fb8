import fjs from 'fast-json-stringify'
const names = Array.from({ length: 100 }, (_, i) => `name-${i}`)
const stringify = fjs({ type: 'object', properties: { items: { type: 'array', items: { type: 'string' } } } })
const N = 100_000
for (const [label, fn] of [['fast-json-stringify', () => stringify({ items: names })], ['JSON.stringify', () => JSON.stringify({ items: names })]] as const) {
  let best = Infinity
  for (let r = 0; r < 5; r++) { const s = process.hrtime.bigint(); for (let i = 0; i < N; i++) fn(); best = Math.min(best, Number(process.hrtime.bigint() - s) / N) }
  console.log(label, (best / 1000).toFixed(2), 'µs')
}
