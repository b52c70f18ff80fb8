import t from 'tap'
import { buildService } from './helpers/service.ts'

t.test('without CORS_ORIGINS no CORS headers are sent', async (t) => {
  const { app } = await buildService(t)
  const res = await app.inject({ method: 'GET', url: '/items/', headers: { origin: 'https://app.example' } })
  t.equal(res.headers['access-control-allow-origin'], undefined)
})

t.test('with CORS_ORIGINS', async (t) => {
  const { app } = await buildService(t, { env: { CORS_ORIGINS: 'https://app.example' } })

  t.test('an allowed origin is echoed back', async (t) => {
    const res = await app.inject({ method: 'GET', url: '/items/', headers: { origin: 'https://app.example' } })
    t.equal(res.headers['access-control-allow-origin'], 'https://app.example')
    t.equal(res.headers['access-control-expose-headers'], 'X-Request-Id, Retry-After, Link, Idempotent-Replayed, ETag')
  })

  t.test('another origin gets no CORS headers', async (t) => {
    const res = await app.inject({ method: 'GET', url: '/items/', headers: { origin: 'https://evil.example' } })
    t.equal(res.headers['access-control-allow-origin'], undefined)
  })

  t.test('a preflight for DELETE is allowed', async (t) => {
    const res = await app.inject({
      method: 'OPTIONS',
      url: '/items/apple',
      headers: { origin: 'https://app.example', 'access-control-request-method': 'DELETE' },
    })
    t.equal(res.statusCode, 204)
    t.match(res.headers['access-control-allow-methods'], /DELETE/)
  })
})

t.test('CORS_ORIGINS=* allows any origin', async (t) => {
  const { app } = await buildService(t, { env: { CORS_ORIGINS: '*' } })
  const res = await app.inject({ method: 'GET', url: '/items/', headers: { origin: 'https://anyone.example' } })
  t.equal(res.headers['access-control-allow-origin'], '*')
})
