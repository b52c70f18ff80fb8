import { execFile } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'

const run = promisify(execFile)

/** A private CA and a server certificate it signed, as PEM files in a directory of their own. */
export interface TestCertificates {
  /** The CA's certificate: what a client must be told to trust. */
  caFile: string
  /** The server's certificate, for `localhost` and `127.0.0.1`. */
  certFile: string
  keyFile: string
  /** Deletes the files. */
  dispose(): Promise<void>
}

/**
 * Makes a CA no system trusts and a certificate it signed for `localhost` and `127.0.0.1`, with
 * the openssl CLI (Debian's openssl package, present wherever redis-server is): a TLS test then
 * shows both that the CA is needed and that it is enough.
 */
export async function createTestCertificates(): Promise<TestCertificates> {
  const dir = await mkdtemp(join(tmpdir(), 'test-certificates-'))
  const file = (name: string) => join(dir, name)
  const openssl = (...args: string[]) => run('openssl', args)
  await openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=test CA', '-keyout', file('ca.key'), '-out', file('ca.crt'))
  await openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=localhost', '-keyout', file('server.key'), '-out', file('server.csr'))
  await writeFile(file('server.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n')
  await openssl(
    'x509', '-req', '-in', file('server.csr'), '-CA', file('ca.crt'), '-CAkey', file('ca.key'), '-CAcreateserial', '-days', '1',
    '-extfile', file('server.ext'), '-out', file('server.crt'),
  )
  return { caFile: file('ca.crt'), certFile: file('server.crt'), keyFile: file('server.key'), dispose: () => rm(dir, { recursive: true, force: true }) }
}
