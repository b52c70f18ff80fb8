import t from 'tap'
import { renderSwaggerUi, whyNoBrowser } from '@repo/test-support'
import { buildService } from '../helpers/service.ts'

t.test('Swagger UI at /docs renders every operation in headless Chromium, with no CSP error', { skip: await whyNoBrowser() }, async (t) => {
  const { app } = await buildService(t)
  const address = await app.listen({ host: '127.0.0.1', port: 0 })

  const { operations, problems } = await renderSwaggerUi(`${address}/docs`)
  t.same(problems, [], 'no console error, page error or CSP violation')
  t.same([...operations].sort(), ['/', '/health', '/items/', '/items/', '/items/events', '/items/{item_name}', '/metrics', '/ready'])
})
