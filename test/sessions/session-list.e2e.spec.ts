import path from 'node:path';
import {
  call,
  governanceFixture,
  requestTool,
  waitForToolCall,
  type GovernanceFixture,
} from '../support/governance-fixture.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import { eventually, probe } from '../support/probe.js';

/**
 * `GET /v1/sessions`: full-text hits in titles, metadata and message text, each filter, keyset
 * paging that stays exact while sessions are recorded meanwhile, tenants kept apart, who may
 * list, and bad input named by its field. A governed ledger, so a call can await approval.
 */
const OTHER_TENANT = 'globex-producer';

describe('finding sessions', () => {
  let fixture: GovernanceFixture;
  let ledger: LedgerUnderTest;
  const url = () => ledger.baseUrl;
  /** Session ids by role in the scenario. */
  const ids = { penguins: '', failing: '', empty: '', governed: '' };

  const list = async (query = '', who?: string) => {
    const response = await call(url(), 'GET', `/v1/sessions${query}`, undefined, who);
    expect(response.status).toBe(200);
    return response.body as { sessions: any[]; nextCursor: string | null };
  };
  const idsOf = async (query: string, who?: string) => (await list(query, who)).sessions.map((s) => s.sessionId);

  async function openSession(body: Record<string, unknown>, who?: string): Promise<{ id: string; position: number }> {
    const opened = await call(url(), 'POST', '/v1/sessions', body, who);
    expect(opened.status).toBe(201);
    return opened.body;
  }

  async function message(sessionId: string, body: Record<string, unknown>, chunks?: unknown[], who?: string) {
    const created = await call(url(), 'POST', `/v1/sessions/${sessionId}/messages`, body, who);
    expect(created.status).toBe(201);
    if (!chunks) return created.body.position as number;
    const route = `/v1/sessions/${sessionId}/messages/${created.body.id}/chunks`;
    const appended = await call(url(), 'POST', route, chunks, who);
    expect(appended.status).toBe(200);
    return appended.body.position as number;
  }

  /** Waits (bounded) until the read models reflect `position`. */
  async function projected(sessionId: string, position: number, who?: string) {
    const read = await call(url(), 'GET', `/v1/sessions/${sessionId}?minPosition=${position}`, undefined, who);
    expect(read.status).toBe(200);
  }

  beforeAll(async () => {
    fixture = await governanceFixture();
    ledger = await startLedger(fixture.env());
    await ledger.credentials.key(OTHER_TENANT, { tenant: 'globex' });
    await ledger.credentials.key('reader-only', { roles: ['reader'] });
    await ledger.credentials.key('admin-only', { roles: ['admin'] });

    ids.empty = (await openSession({ title: 'Nothing yet' })).id;
    ids.penguins = (await openSession({ title: 'Quarterly report', metadata: { project: 'apollo', run: 7 } })).id;
    await message(ids.penguins, { role: 'user', content: 'How do penguins swim?' });
    await message(ids.penguins, { role: 'assistant', model: 'gpt-test' }, [
      { seq: 1, type: 'llm_response_created' },
      { seq: 2, type: 'text.start' },
      { seq: 3, type: 'text.delta', text: 'They flap their flippers' },
      { seq: 4, type: 'text.complete', text: 'They flap their flippers underwater.' },
      {
        seq: 5,
        type: 'block_complete',
        response: { usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 } },
      },
    ]);
    ids.failing = (await openSession({ title: 'Broken run', metadata: { project: 'zeus' } })).id;
    await message(ids.failing, { role: 'user', content: 'hello there' });
    const failed = await message(ids.failing, { role: 'assistant', model: 'claude-test' }, [
      { seq: 1, type: 'llm_response_created' },
      { seq: 2, type: 'error', error: { name: 'APIError', message: 'overloaded' } },
    ]);
    await projected(ids.failing, failed);

    // The same words in another tenant, under one of this tenant's ids.
    await openSession({ id: ids.penguins, title: 'Quarterly report', metadata: { project: 'apollo' } }, OTHER_TENANT);
    const foreign = await message(ids.penguins, { role: 'user', content: 'penguins again' }, undefined, OTHER_TENANT);
    await projected(ids.penguins, foreign, OTHER_TENANT);
  }, 60_000);

  afterAll(async () => {
    await ledger?.close();
    await fixture?.close();
  });

  it('lists the tenant’s sessions, newest activity first, each with its summary', async () => {
    const { sessions, nextCursor } = await list();
    expect(sessions.map((s) => s.sessionId)).toEqual([ids.failing, ids.penguins, ids.empty]);
    expect(nextCursor).toBeNull();
    const penguins = sessions[1];
    expect(penguins).toEqual({
      sessionId: ids.penguins,
      title: 'Quarterly report',
      model: 'gpt-test',
      status: 'success',
      metadata: { project: 'apollo', run: 7 },
      createdAt: expect.any(String),
      lastActivityAt: expect.any(String),
      messageCount: 2,
      usage: { promptTokens: 11, completionTokens: 7, totalTokens: 18 },
      hasPendingApprovals: false,
      hasErrors: false,
    });
    expect(Date.parse(penguins.lastActivityAt)).toBeGreaterThanOrEqual(Date.parse(penguins.createdAt));
    expect(sessions[0]).toMatchObject({ model: 'claude-test', status: 'error', hasErrors: true, messageCount: 2 });
    expect(sessions[2]).toMatchObject({
      model: null,
      status: 'empty',
      messageCount: 0,
      usage: { promptTokens: 0, completionTokens: 0, totalTokens: 0 },
    });
  });

  it('finds words in titles, metadata, user messages and assistant text', async () => {
    expect(await idsOf('?q=quarterly')).toEqual([ids.penguins]);
    expect(await idsOf('?q=apollo')).toEqual([ids.penguins]);
    expect(await idsOf('?q=7')).toEqual([ids.penguins]);
    expect(await idsOf('?q=penguins')).toEqual([ids.penguins]);
    expect(await idsOf('?q=flippers')).toEqual([ids.penguins]);
    expect(await idsOf('?q=zeus')).toEqual([ids.failing]);
    expect(await idsOf('?q=REPORT%20quarterly')).toEqual([ids.penguins]);
    expect(await idsOf(`?q=${encodeURIComponent('"flap their"')}`)).toEqual([ids.penguins]);
    expect(await idsOf(`?q=${encodeURIComponent('penguins or zeus')}`)).toEqual([ids.failing, ids.penguins]);
    expect(await idsOf(`?q=${encodeURIComponent('report -quarterly')}`)).toEqual([]);
    expect(await idsOf('?q=walrus')).toEqual([]);
    // Empty parameters count as not given.
    expect(await idsOf('?q=&model=&status=&hasErrors=&from=&cursor=&limit=')).toEqual([
      ids.failing,
      ids.penguins,
      ids.empty,
    ]);
  });

  it('filters by model, status, errors and a window of last activity', async () => {
    expect(await idsOf('?model=gpt-test')).toEqual([ids.penguins]);
    expect(await idsOf('?model=none-such')).toEqual([]);
    expect(await idsOf('?status=error')).toEqual([ids.failing]);
    expect(await idsOf('?status=success')).toEqual([ids.penguins]);
    expect(await idsOf('?status=empty')).toEqual([ids.empty]);
    expect(await idsOf('?hasErrors=true')).toEqual([ids.failing]);
    expect(await idsOf('?hasErrors=false')).toEqual([ids.penguins, ids.empty]);
    expect(await idsOf('?q=hello&hasErrors=false')).toEqual([]);

    const { sessions } = await list();
    const at = (id: string) => sessions.find((s) => s.sessionId === id).lastActivityAt as string;
    const window = (from: string, to: string) =>
      idsOf(`?from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`);
    // `from` is included, `to` excluded.
    expect(await window(at(ids.penguins), at(ids.failing))).toEqual(
      at(ids.penguins) === at(ids.failing) ? [] : [ids.penguins],
    );
    expect(await idsOf(`?from=${encodeURIComponent(at(ids.failing))}`)).toContain(ids.failing);
    expect(await idsOf(`?to=${encodeURIComponent(at(ids.empty))}`)).not.toContain(ids.empty);
    expect(await idsOf(`?from=${encodeURIComponent('2999-01-01T00:00:00+02:00')}`)).toEqual([]);
  });

  it('shows and filters sessions with a tool call awaiting approval', async () => {
    ids.governed = (await openSession({ title: 'governed' })).id;
    const target = path.join(fixture.workspace, 'written.txt');
    const { toolCallId } = await requestTool(
      url(),
      ids.governed,
      'call_write',
      { server: 'filesystem', name: 'write_file' },
      { path: target, content: 'x' },
    );
    await waitForToolCall(url(), toolCallId, (toolCall) => toolCall.status === 'awaiting_approval');
    const pending = await eventually('the list shows the pending approval', async () => {
      const found = await idsOf('?hasPendingApprovals=true');
      return found.length > 0 ? found : undefined;
    });
    expect(pending).toEqual([ids.governed]);
    expect(await idsOf('?hasPendingApprovals=false')).not.toContain(ids.governed);
    const row = (await list('?q=governed')).sessions[0];
    expect(row).toMatchObject({ sessionId: ids.governed, hasPendingApprovals: true, model: 'test-model' });
  }, 60_000);

  it('pages by cursor without losing or repeating a session while others are recorded', async () => {
    const paged = 'paging';
    const before: string[] = [];
    for (let n = 0; n < 12; n += 1) before.push((await openSession({ title: `${paged} ${n}` })).id);
    const last = await openSession({ title: `${paged} 12` });
    before.push(last.id);
    await projected(last.id, last.position);

    let recording = true;
    const recordedMeanwhile: string[] = [];
    const recorder = (async () => {
      while (recording) recordedMeanwhile.push((await openSession({ title: `${paged} meanwhile` })).id);
    })();
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page = await list(`?q=${paged}&limit=4${cursor ? `&cursor=${cursor}` : ''}`);
      expect(page.sessions.length).toBeLessThanOrEqual(4);
      seen.push(...page.sessions.map((s) => s.sessionId));
      cursor = page.nextCursor;
      pages += 1;
    } while (cursor !== null && pages < 50);
    recording = false;
    await recorder;

    expect(recordedMeanwhile.length).toBeGreaterThan(0);
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen.filter((id) => before.includes(id))).toEqual([...before].reverse());
  }, 60_000);

  it('never shows another tenant’s sessions, though words and ids match', async () => {
    const foreign = await list('?q=penguins', OTHER_TENANT);
    expect(foreign.sessions).toHaveLength(1);
    expect(foreign.sessions[0]).toMatchObject({ sessionId: ids.penguins, messageCount: 1, model: null });
    expect(foreign.sessions[0].metadata).toEqual({ project: 'apollo' });
    const all = (await list('?limit=200', OTHER_TENANT)).sessions.map((s) => s.sessionId);
    expect(all).toEqual([ids.penguins]);
    const mine = await list('?q=penguins');
    expect(mine.sessions).toHaveLength(1);
    expect(mine.sessions[0].messageCount).toBe(2);
  });

  it('lets every reader list, and refuses admins and callers without a credential', async () => {
    expect((await call(url(), 'GET', '/v1/sessions?limit=1', undefined, 'reader-only')).status).toBe(200);
    const admin = await call(url(), 'GET', '/v1/sessions', undefined, 'admin-only');
    expect(admin.status).toBe(403);
    expect((await probe(url(), 'GET', '/v1/sessions')).status).toBe(401);
  });

  it('answers hostile searches as plain searches, never with a 500', async () => {
    const hostile = [
      '"unterminated',
      "'; DROP TABLE sessions; --",
      'a & | ! ( ) <-> :* b',
      '\\',
      '\\\\\'"',
      '!!!',
      'penguins:*',
      '((((',
      'x'.repeat(1_000),
      Array.from({ length: 80 }, (_, n) => `w${n}`).join(' or '),
      '🐧 ünïcödé 中文',
    ];
    for (const q of hostile) {
      const response = await call(url(), 'GET', `/v1/sessions?q=${encodeURIComponent(q)}`);
      expect({ q, status: response.status }).toEqual({ q, status: 200 });
    }
    expect((await list()).sessions.length).toBeGreaterThan(0);
  });

  it.each([
    ['q', `q=${'x'.repeat(1_001)}`],
    ['q', 'q=a%00b'],
    ['q', 'q=a&q=b'],
    ['model', `model=${'m'.repeat(201)}`],
    ['status', 'status=running'],
    ['hasPendingApprovals', 'hasPendingApprovals=yes'],
    ['hasErrors', 'hasErrors=1'],
    ['from', 'from=yesterday'],
    ['to', 'to=2026-01-01'],
    ['to', 'from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z'],
    ['cursor', 'cursor=not-a-cursor'],
    ['cursor', `cursor=${Buffer.from('["2026-01-01", "x"]').toString('base64url')}`],
    ['cursor', `cursor=${Buffer.from('{"a":1}').toString('base64url')}`],
    ['limit', 'limit=0'],
    ['limit', 'limit=201'],
    ['limit', 'limit=ten'],
    ['sort', 'sort=title'],
  ])('refuses a bad %s (%s) with a 400 naming it', async (field, query) => {
    const response = await call(url(), 'GET', `/v1/sessions?${query}`);
    expect(response.status).toBe(400);
    expect(response.body.error).toMatchObject({ code: 'invalid_request', field });
  });

  it('finds a text block’s words while it streams, never for another tenant, and still once it has ended', async () => {
    const sessionId = (await openSession({ title: 'Live run' })).id;
    const created = await call(url(), 'POST', `/v1/sessions/${sessionId}/messages`, { role: 'assistant' });
    expect(created.status).toBe(201);
    const chunks = async (batch: unknown[]) => {
      const route = `/v1/sessions/${sessionId}/messages/${created.body.id}/chunks`;
      const appended = await call(url(), 'POST', route, batch);
      expect(appended.status).toBe(200);
      await projected(sessionId, appended.body.position);
    };
    await chunks([
      { seq: 1, type: 'llm_response_created' },
      { seq: 2, type: 'text.start' },
      { seq: 3, type: 'text.delta', text: 'narwhals surface' },
    ]);
    expect(await idsOf('?q=narwhals')).toEqual([sessionId]);
    // The other tenant holds a session under the same id: only its own blocks may match there.
    await openSession({ id: sessionId, title: 'Elsewhere' }, OTHER_TENANT);
    expect(await idsOf('?q=narwhals', OTHER_TENANT)).toEqual([]);
    // A delta carries the text so far.
    await chunks([{ seq: 4, type: 'text.delta', text: 'narwhals surface slowly' }]);
    expect(await idsOf(`?q=${encodeURIComponent('"surface slowly"')}`)).toEqual([sessionId]);
    expect(await idsOf('?q=walrus')).toEqual([]);
    await chunks([
      { seq: 5, type: 'text.complete', text: 'narwhals surface slowly, then dive.' },
      { seq: 6, type: 'block_complete' },
    ]);
    expect(await idsOf('?q=dive')).toEqual([sessionId]);
    expect(await idsOf('?q=narwhals')).toEqual([sessionId]);
  });
  // 1,100 reports of 2^53 - 1 summed past PostgreSQL's bigint: the projection failed on the row for ever, and every
  // tenant's reads behind it.
  it('holds a producer’s absurd usage at 2^53 - 1 and goes on projecting', async () => {
    const absurd = (await openSession({ title: 'Absurd usage' })).id;
    const usage = { prompt_tokens: Number.MAX_SAFE_INTEGER, completion_tokens: 1 };
    const reports = Array.from({ length: 1_100 }, (_, index) => ({
      seq: index + 2,
      type: 'llm_response_complete',
      response: { usage },
    }));
    await message(absurd, { role: 'assistant', model: 'gpt-test' }, [
      { seq: 1, type: 'llm_response_created' },
      ...reports,
    ]);
    const after = (await openSession({ title: 'After the absurd one' })).id;
    await projected(after, await message(after, { role: 'user', content: 'still projected' }));
    const [newest, held] = (await list('?limit=2')).sessions;
    expect(newest.sessionId).toBe(after);
    expect(held).toMatchObject({
      sessionId: absurd,
      usage: { promptTokens: Number.MAX_SAFE_INTEGER, completionTokens: 1_100, totalTokens: Number.MAX_SAFE_INTEGER },
    });
  });
});
