import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import { keyActor } from '../support/test-credentials.js';
import {
  call,
  governanceFixture,
  PRODUCER,
  requestTool,
  trail,
  waitForToolCall,
  type GovernanceFixture,
} from '../support/governance-fixture.js';

const awaiting = (toolCall: { status: string }) => toolCall.status === 'awaiting_approval';
const completed = (toolCall: { status: string }) => toolCall.status === 'completed';

/**
 * Separation of duties on principals, through HTTP with the real filesystem server: the subject
 * that requested a call decides nothing about it, whichever of its keys it uses; a policy can
 * require two distinct reviewers for a tool, and one reviewer never counts twice.
 */
describe('separation of duties and four-eyes approvals', () => {
  let fixture: GovernanceFixture;
  let ledger: LedgerUnderTest;
  let sessionId: string;
  const url = () => ledger.baseUrl;

  beforeAll(async () => {
    fixture = await governanceFixture({ policy: ['approvals:', '  tools: {"filesystem/write_file": 2}'] });
    ledger = await startLedger(fixture.env());
    sessionId = (await call(url(), 'POST', '/v1/sessions', { title: 'four eyes' })).body.id;
    // A second key of the requester's subject, and a second key of alice's.
    await ledger.credentials.key('producer-laptop', { subject: PRODUCER });
    await ledger.credentials.key('alice-laptop', { subject: 'alice' });
  });
  afterAll(async () => {
    await ledger?.close();
    await fixture?.close();
  });

  it('the requester, by its key or another key of the same subject, neither approves nor denies', async () => {
    const target = path.join(fixture.workspace, 'self.txt');
    const { toolCallId } = await requestTool(
      url(),
      sessionId,
      'call_self',
      { server: 'filesystem', name: 'write_file' },
      { path: target, content: 'x' },
    );
    const { argumentsSha256 } = await waitForToolCall(url(), toolCallId, awaiting);
    for (const who of [PRODUCER, 'producer-laptop']) {
      for (const decision of ['approve', 'deny']) {
        const refused = await call(url(), 'POST', `/v1/tool-calls/${toolCallId}/${decision}`, { argumentsSha256 }, who);
        expect(refused).toMatchObject({ status: 403, body: { error: { code: 'self_approval' } } });
      }
    }
    // Nothing of the refusals was recorded.
    const still = await call(url(), 'GET', `/v1/tool-calls/${toolCallId}`, undefined, 'alice');
    expect(trail(still.body)).toEqual(['requested', 'firewall_evaluated', 'guardian_reviewed', 'approval_requested']);
    expect(existsSync(target)).toBe(false);
  });

  it('a tool the policy gives two approvals runs after two distinct reviewers; the same reviewer twice does not count', async () => {
    const target = path.join(fixture.workspace, 'four-eyes.txt');
    const { toolCallId } = await requestTool(
      url(),
      sessionId,
      'call_4eyes',
      { server: 'filesystem', name: 'write_file' },
      { path: target, content: 'two said yes' },
    );
    const waiting = await waitForToolCall(url(), toolCallId, awaiting);
    expect(waiting.approval).toMatchObject({ required: 2 });
    const approve = (who: string) =>
      call(url(), 'POST', `/v1/tool-calls/${toolCallId}/approve`, { argumentsSha256: waiting.argumentsSha256 }, who);

    const first = await approve('alice');
    expect(first).toMatchObject({
      status: 200,
      body: {
        status: 'awaiting_approval',
        approval: { approvals: [{ by: keyActor('alice'), subject: 'subject:alice' }] },
      },
    });
    expect(await approve('alice')).toMatchObject({ status: 409, body: { error: { code: 'already_approved' } } });
    expect(await approve('alice-laptop')).toMatchObject({ status: 409, body: { error: { code: 'already_approved' } } });
    expect(existsSync(target)).toBe(false);

    const second = await approve('bob');
    expect(second).toMatchObject({ status: 200, body: { decision: { approved: true, by: keyActor('bob') } } });
    const done = await waitForToolCall(url(), toolCallId, completed);
    expect(trail(done)).toEqual([
      'requested',
      'firewall_evaluated',
      'guardian_reviewed',
      'approval_requested',
      'approval_recorded',
      'approved',
      'execution_started',
      'execution_succeeded',
      'completed',
    ]);
    expect(done.decision.approvals.map((approval: { subject: string }) => approval.subject)).toEqual([
      'subject:alice',
      'subject:bob',
    ]);
    expect(readFileSync(target, 'utf8')).toBe('two said yes');
  });

  it('with two approvals required, one denial ends the call', async () => {
    const target = path.join(fixture.workspace, 'denied.txt');
    const { toolCallId } = await requestTool(
      url(),
      sessionId,
      'call_4eyes_no',
      { server: 'filesystem', name: 'write_file' },
      { path: target, content: 'no' },
    );
    const { argumentsSha256 } = await waitForToolCall(url(), toolCallId, awaiting);
    expect(
      (await call(url(), 'POST', `/v1/tool-calls/${toolCallId}/approve`, { argumentsSha256 }, 'alice')).status,
    ).toBe(200);
    expect(
      await call(url(), 'POST', `/v1/tool-calls/${toolCallId}/deny`, { argumentsSha256, comment: 'no' }, 'bob'),
    ).toMatchObject({
      status: 200,
      body: { status: 'denied' },
    });
    const done = await waitForToolCall(url(), toolCallId, completed);
    expect(done.outcome).toBe('denied');
    expect(existsSync(target)).toBe(false);
  });
});
