import { generateKeyPairSync, verify } from 'node:crypto'
import t from 'tap'
import { signAppJwt } from '../../src/credentials/app-calls.ts'

const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
const decode = (part: string) => JSON.parse(Buffer.from(part, 'base64url').toString()) as Record<string, unknown>

t.test('an App JWT is RS256, issued by the App 60 s in the past, and expires 9 minutes ahead', async (t) => {
  const now = 1_800_000_000_500
  const [header, claims, signature] = signAppJwt('424242', privateKey, now).split('.')
  t.same(decode(header!), { alg: 'RS256', typ: 'JWT' })
  t.same(decode(claims!), { iat: 1_800_000_000 - 60, exp: 1_800_000_000 + 9 * 60, iss: '424242' })
  t.ok(verify('sha256', Buffer.from(`${header}.${claims}`), publicKey, Buffer.from(signature!, 'base64url')), 'signed with the App key')
})
