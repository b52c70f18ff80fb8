import t from 'tap'
import { Type } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { projectionOf } from '../../src/upstream/projection.ts'

const Repo = TypeCompiler.Compile(Type.Object({ name: Type.String(), owner: Type.Object({ login: Type.String() }) }))

t.test('a projection keeps the fields its check names, nested ones included, and nothing else', async (t) => {
  const body = { name: 'hello', size: 108, owner: { login: 'octocat', id: 1 }, topics: ['a'] }
  t.same(projectionOf(Repo).project(body), { name: 'hello', owner: { login: 'octocat' } })
})

t.test('one projection per check; a schema naming other fields has another shape', async (t) => {
  t.equal(projectionOf(Repo), projectionOf(Repo))
  const Wider = TypeCompiler.Compile(Type.Object({ name: Type.String(), owner: Type.Object({ login: Type.String() }), size: Type.Integer() }))
  t.not(projectionOf(Wider).shape, projectionOf(Repo).shape)
  const Same = TypeCompiler.Compile(Type.Object({ name: Type.String(), owner: Type.Object({ login: Type.String() }) }))
  t.equal(projectionOf(Same).shape, projectionOf(Repo).shape, 'the shape is the schema, not the check object')
})
