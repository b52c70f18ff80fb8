import t from 'tap'
import { dropsFor, eventLabel } from '../../src/webhooks/events.ts'

const repository = (owner: string, name: string) => ({ name, owner: { login: owner } })
const keysOf = (event: string, payload: unknown, installationId?: string) => dropsFor(event, payload, installationId)?.keys

t.test('repository events drop the owner’s users and repos answers and the repository’s, lower case', async (t) => {
  for (const event of ['star', 'push', 'repository']) {
    t.same(dropsFor(event, { action: 'created', repository: repository('Mona', 'Hello') }, undefined), {
      owner: 'Mona',
      keys: ['users/mona', 'repos/mona', 'repo/mona/hello'],
      forgetsDefaultToken: false,
    }, event)
  }
  t.same(keysOf('repository', { action: 'renamed', repository: repository('mona', 'new'), changes: { repository: { name: { from: 'old' } } } }), [
    'users/mona',
    'repos/mona',
    'repo/mona/new',
    'repo/mona/old',
  ], 'renamed: the old name too')
  t.same(keysOf('repository', { action: 'transferred', repository: repository('mona', 'hello'), changes: { owner: { from: { user: { login: 'Hubot' } } } } }), [
    'users/mona',
    'repos/mona',
    'repo/mona/hello',
    'users/hubot',
    'repos/hubot',
    'repo/hubot/hello',
  ], 'transferred: the old owner’s too')
  t.same(keysOf('repository', { action: 'transferred', repository: repository('mona', 'hello'), changes: { owner: { from: { organization: { login: 'org' } } } } })?.slice(3), [
    'users/org',
    'repos/org',
    'repo/org/hello',
  ], 'from an organization')
  t.same(keysOf('fork', { forkee: repository('hubot', 'hello'), repository: repository('mona', 'hello') }), [
    'users/mona',
    'repos/mona',
    'repo/mona/hello',
    'users/hubot',
    'repos/hubot',
    'repo/hubot/hello',
  ], 'fork: the forker’s too')
})

t.test('issues and pull requests drop their author’s users answer, lower case, for the actions that change the counts', async (t) => {
  for (const action of ['opened', 'closed', 'reopened', 'deleted', 'transferred']) t.same(keysOf('issues', { action, issue: { user: { login: 'Mona' } } }), ['users/mona'], action)
  for (const action of ['opened', 'closed', 'reopened']) t.same(keysOf('pull_request', { action, pull_request: { user: { login: 'Mona' } } }), ['users/mona'], action)
  t.equal(keysOf('pull_request', { action: 'edited', pull_request: { user: { login: 'mona' } } }), undefined)
  t.equal(keysOf('issues', { action: 'edited', issue: { user: { login: 'mona' } } }), undefined)
})

t.test('what the service does not answer, or a payload without what is read, drops nothing', async (t) => {
  t.equal(keysOf('fork', { repository: repository('mona', 'hello') }), undefined)
  t.equal(keysOf('push', { repository: { name: 'hello' } }), undefined)
  t.equal(keysOf('issues', { action: 'opened' }), undefined)
  t.equal(keysOf('watch', { repository: repository('mona', 'hello') }), undefined)
  t.equal(keysOf('installation', { action: 'deleted', installation: { id: 7 } }, '9001'), undefined, 'another installation')
  t.equal(keysOf('installation', { action: 'deleted', installation: { id: 9001 } }, undefined), undefined, 'no App')
  t.same(dropsFor('installation', { action: 'suspend', installation: { id: 9001 } }, '9001'), { owner: undefined, keys: [], forgetsDefaultToken: true })
})

t.test('the event label is a known event or other', async (t) => {
  t.equal(eventLabel('star'), 'star')
  t.equal(eventLabel('x'.repeat(100)), 'other')
  t.equal(eventLabel(undefined), 'other')
})

t.test('a public App: every installation counts; its account and token go as the action says, the rename moves it', async (t) => {
  const installation = (action: string, id = 7) => ({ action, installation: { id, account: { login: 'Mona' } } })
  t.same(dropsFor('installation', installation('created'), '9001', true), {
    owner: 'Mona',
    keys: [],
    forgetsDefaultToken: false,
    installations: { accounts: [{ login: 'Mona', installation: '7' }], forget: [] },
  })
  t.same(dropsFor('installation', installation('unsuspend'), '9001', true)?.installations?.accounts, [{ login: 'Mona', installation: '7' }])
  t.same(dropsFor('installation', installation('deleted'), '9001', true), {
    owner: 'Mona',
    keys: [],
    forgetsDefaultToken: false,
    installations: { accounts: [{ login: 'Mona', installation: null }], forget: ['7'] },
  })
  t.equal(dropsFor('installation', installation('suspend', 9001), '9001', true)?.forgetsDefaultToken, true, "the default's token goes too")
  t.equal(dropsFor('installation', installation('new_permissions_accepted'), '9001', true), undefined)
  t.equal(dropsFor('installation', { action: 'created', installation: { id: 7 } }, '9001', true), undefined, 'no account')
  const renamed = { action: 'renamed', installation: { id: 7 }, account: { login: 'Mona-Lisa' }, changes: { login: { from: 'Mona' } } }
  t.same(dropsFor('installation_target', renamed, undefined, true), {
    owner: 'Mona-Lisa',
    keys: ['users/mona', 'repos/mona'],
    forgetsDefaultToken: false,
    installations: {
      accounts: [
        { login: 'Mona', installation: null },
        { login: 'Mona-Lisa', installation: '7' },
      ],
      forget: [],
    },
  })
  t.equal(dropsFor('installation_target', { ...renamed, changes: { slug: { from: 'mona' } } }, undefined, true), undefined, 'an organization slug alone')
  t.equal(dropsFor('installation_target', renamed, undefined), undefined, 'not a public App')
  t.equal(eventLabel('installation_target'), 'installation_target')
})
