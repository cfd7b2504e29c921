import path from 'node:path';
import { governedToolCallId } from '#core';
import { governanceFixture, type GovernanceFixture } from '../support/governance-fixture.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import { eventually, probe } from '../support/probe.js';
import { connectSse, type SseConnection } from '../support/sse-client.js';

/**
 * Two tenants use the same client ids and never meet: each sees its own events only, on every
 * feed, and the other tenant's ids are not found anywhere.
 */
const TENANTS = ['default', 'acme'] as const;
type Tenant = (typeof TENANTS)[number];
const SHARED_ID = 'shared';
const secretOf = (tenant: Tenant) => `the secret of ${tenant}`;
const otherThan = (tenant: Tenant): Tenant => (tenant === 'default' ? 'acme' : 'default');
const onlyOf = (tenant: Tenant) => `${tenant}-only`;

describe('tenants with the same client ids', () => {
  let fixture: GovernanceFixture;
  let ledger: LedgerUnderTest;
  const keys = new Map<Tenant, string>();
  const as = (tenant: Tenant, method: string, path: string, body?: unknown) =>
    probe(ledger.baseUrl, method, path, { credential: keys.get(tenant), body });

  /** A session with a user message and an assistant reply streamed in two batches; the last position. */
  async function streamSession(tenant: Tenant, sessionId: string): Promise<number> {
    const text = secretOf(tenant);
    const calls: [string, unknown][] = [
      ['/v1/sessions', { id: sessionId, title: `${tenant}'s session` }],
      [`/v1/sessions/${sessionId}/messages`, { id: 'u1', role: 'user', content: `${text}: the question` }],
      [`/v1/sessions/${sessionId}/messages`, { id: 'a1', role: 'assistant' }],
      [
        `/v1/sessions/${sessionId}/messages/a1/chunks`,
        [
          { seq: 1, type: 'llm_response_created' },
          { seq: 2, type: 'text.start' },
          { seq: 3, type: 'text.delta', text },
        ],
      ],
      [
        `/v1/sessions/${sessionId}/messages/a1/chunks`,
        [
          { seq: 4, type: 'text.complete', text },
          { seq: 5, type: 'block_complete' },
        ],
      ],
    ];
    let position = 0;
    for (const [path, body] of calls) {
      const answer = await as(tenant, 'POST', path, body);
      expect(answer.status).toBeLessThan(300);
      position = answer.body.position;
    }
    return position;
  }

  beforeAll(async () => {
    fixture = await governanceFixture();
    ledger = await startLedger(fixture.env());
    for (const tenant of TENANTS) keys.set(tenant, await ledger.credentials.key(`${tenant}-client`, { tenant }));
  });
  afterAll(async () => {
    await ledger?.close();
    await fixture?.close();
  });

  it('each tenant sees only its own events on the raw feed and its session feed', async () => {
    const feeds = new Map<Tenant, SseConnection[]>();
    for (const tenant of TENANTS) {
      // The broadest filters there are: none, and a stream prefix every tenant's session streams start with.
      const urls = ['/v1/events/live', '/v1/events/live?types=&streams=session-'];
      feeds.set(
        tenant,
        urls.map((url) => connectSse(`${ledger.baseUrl}${url}`, { key: keys.get(tenant) })),
      );
    }
    for (const feed of [...feeds.values()].flat()) expect((await feed.opened).status).toBe(200);

    const positions = new Map<Tenant, number>();
    for (const tenant of TENANTS) positions.set(tenant, await streamSession(tenant, SHARED_ID));
    const sessionFeeds = new Map(
      TENANTS.map((tenant) => [
        tenant,
        connectSse(`${ledger.baseUrl}/v1/sessions/${SHARED_ID}/live`, { key: keys.get(tenant) }),
      ]),
    );
    // Credentials are audited in their tenant's log too.
    await ledger.credentials.mint('acme-late', { tenant: 'acme', roles: ['reader'] });
    // Each tenant writes once more after both have written: a feed that shows its marker has passed
    // every event before it.
    const markers = new Map<Tenant, number>();
    for (const tenant of TENANTS) {
      const body = { id: 'marker', role: 'user', content: 'done' };
      const marker = await as(tenant, 'POST', `/v1/sessions/${SHARED_ID}/messages`, body);
      expect(marker.status).toBe(201);
      markers.set(tenant, marker.body.position);
    }

    for (const tenant of TENANTS) {
      const secret = secretOf(tenant);
      const elsewhere = secretOf(otherThan(tenant));
      const own = await as(tenant, 'GET', `/v1/sessions/${SHARED_ID}/events?limit=1000`);
      const ownPositions = own.body.events.map((event: { position: number }) => String(event.position));
      for (const [index, feed] of feeds.get(tenant)!.entries()) {
        const marker = String(markers.get(tenant));
        const reached = async () => (feed.lastEventId() === marker ? true : undefined);
        await eventually(`${tenant}'s raw feed reaches its marker`, reached);
        expect(feed.events.every((event) => event.data.metadata.tenant === tenant)).toBe(true);
        expect(JSON.stringify(feed.events)).not.toContain(elsewhere);
        expect(ownPositions.every((position: string) => feed.events.some((event) => event.id === position))).toBe(true);
        const credentialEvents = feed.events.filter((event) => event.data.type === 'credential.created');
        const unfiltered = index === 0;
        const expected = tenant === 'acme' && unfiltered ? ['acme-late'] : [];
        expect(credentialEvents.map((event) => event.data.data.name)).toEqual(expected);
      }
      const sessionFeed = sessionFeeds.get(tenant)!;
      expect((await sessionFeed.opened).status).toBe(200);
      const sawMarker = () => sessionFeed.events.some((event) => event.data.id === 'marker');
      await eventually(`${tenant}'s session feed reaches its marker`, async () => (sawMarker() ? true : undefined));
      expect(JSON.stringify(sessionFeed.events)).toContain(secret);
      expect(JSON.stringify(sessionFeed.events)).not.toContain(elsewhere);

      // The same id read now and folded as of a position where both sessions exist: always the tenant's own session.
      const bothWritten = Math.max(...positions.values());
      const reads = [
        `/v1/sessions/${SHARED_ID}?minPosition=${markers.get(tenant)}`,
        `/v1/sessions/${SHARED_ID}?at=${bothWritten}`,
      ];
      for (const path of reads) {
        const read = await as(tenant, 'GET', path);
        expect({ path, status: read.status }).toEqual({ path, status: 200 });
        expect(JSON.stringify(read.body)).toContain(secret);
        expect(JSON.stringify(read.body)).not.toContain(elsewhere);
      }
    }
    for (const feed of [...[...feeds.values()].flat(), ...sessionFeeds.values()]) feed.close();
  });

  it("folds each tenant's fork from its own tenant's source, on every read", async () => {
    const source = 'fork-source';
    for (const tenant of TENANTS) await streamSession(tenant, source);
    for (const tenant of TENANTS) {
      const fork = await as(tenant, 'POST', `/v1/sessions/${source}/fork`, { messageId: 'a1', id: 'the-fork' });
      expect(fork.status).toBe(201);
      const at = fork.body.position;
      // The read model (a live projection), the fold as of a position, and the history built from it.
      for (const route of [
        '/v1/sessions/the-fork',
        `/v1/sessions/the-fork?at=${at}`,
        '/v1/sessions/the-fork/history',
      ]) {
        const read = await as(tenant, 'GET', `${route}${route.includes('?') ? '&' : '?'}minPosition=${at}`);
        expect({ route, status: read.status }).toEqual({ route, status: 200 });
        expect(JSON.stringify(read.body)).toContain(secretOf(tenant));
        expect(JSON.stringify(read.body)).not.toContain(secretOf(otherThan(tenant)));
      }
    }
  });

  it("finds none of the other tenant's ids, on any route", async () => {
    const positions = new Map<Tenant, number>();
    for (const tenant of TENANTS) positions.set(tenant, await streamSession(tenant, onlyOf(tenant)));
    for (const tenant of TENANTS) {
      const elsewhere = otherThan(tenant);
      const sid = onlyOf(elsewhere);
      const eventsBefore = (await as(elsewhere, 'GET', `/v1/sessions/${sid}/events?limit=1000`)).body.events;
      const at = positions.get(elsewhere);
      const calls: [string, string, unknown?][] = [
        ['GET', `/v1/sessions/${sid}`],
        ['GET', `/v1/sessions/${sid}?at=${at}`],
        ['GET', `/v1/sessions/${sid}/tree`],
        ['GET', `/v1/sessions/${sid}/tree?at=${at}`],
        ['GET', `/v1/sessions/${sid}/history`],
        ['GET', `/v1/sessions/${sid}/history?at=${at}`],
        ['GET', `/v1/sessions/${sid}/messages/a1`],
        ['GET', `/v1/sessions/${sid}/messages/a1?at=${at}`],
        ['GET', `/v1/sessions/${sid}/events`],
        ['GET', `/v1/sessions/${sid}/live`],
        ['POST', `/v1/sessions/${sid}/messages`, { role: 'user', content: 'hello from elsewhere' }],
        ['POST', `/v1/sessions/${sid}/messages/a1/chunks`, [{ seq: 6, type: 'llm_response_created' }]],
        ['POST', `/v1/sessions/${sid}/fork`, { messageId: 'a1' }],
        ['POST', `/v1/sessions/${sid}/fork`, { atPosition: at }],
        ['PUT', `/v1/sessions/${sid}/messages/u1/selection`, { childId: 'a1' }],
        ['PUT', `/v1/sessions/${sid}/selection`, { childId: 'u1' }],
        ['POST', `/v1/sessions/${sid}/writers`, { writers: [`subject:${tenant}-client`] }],
      ];
      for (const [method, path, body] of calls) {
        const answer = await as(tenant, method, path, body);
        expect({ tenant, method, path, status: answer.status }).toEqual({ tenant, method, path, status: 404 });
        expect(answer.body.error.code).toMatch(/not_found$/);
      }
      const list = await as(tenant, 'GET', `/v1/tool-calls?sessionId=${sid}`);
      expect(list).toMatchObject({ status: 200, body: { toolCalls: [] } });
      // Nothing was added to the other tenant's session.
      expect((await as(elsewhere, 'GET', `/v1/sessions/${sid}/events?limit=1000`)).body.events).toEqual(eventsBefore);
    }
  });

  it("lets a tenant's admin manage its own keys only", async () => {
    const admin = await ledger.credentials.key('acme-admin', { tenant: 'acme', roles: ['admin'] });
    const asAdmin = (method: string, path: string) => probe(ledger.baseUrl, method, path, { credential: admin });
    const defaultKeyId = /^blk_([a-z0-9]{16})_/.exec(keys.get('default')!)![1];

    expect(await asAdmin('DELETE', `/v1/admin/keys/${defaultKeyId}`)).toMatchObject({
      status: 404,
      body: { error: { code: 'key_not_found' } },
    });
    const listed = await asAdmin('GET', '/v1/admin/keys');
    expect(listed.status).toBe(200);
    expect(listed.body.keys.map((key: { tenant: string }) => key.tenant)).toEqual(listed.body.keys.map(() => 'acme'));
    expect(JSON.stringify(listed.body)).not.toContain(defaultKeyId);
    expect(await asAdmin('GET', '/v1/admin/keys?tenant=default')).toMatchObject({
      status: 403,
      body: { error: { code: 'forbidden' } },
    });
    // The default tenant's key still works.
    expect((await as('default', 'GET', '/v1/tool-calls')).status).toBe(200);
  });

  it("refuses an id that would name another tenant's stream (acme/…), on every route", async () => {
    const sid = 'acme-governed';
    await streamSession('acme', sid);
    // A write the guardian rates high: it waits for a reviewer of acme.
    const acme = (method: string, route: string, body?: unknown) => as('acme', method, route, body);
    expect((await acme('POST', `/v1/sessions/${sid}/messages`, { id: 'a2', role: 'assistant' })).status).toBe(201);
    const target = path.join(fixture.workspace, 'acme.txt');
    const tool = { id: 'filesystem-write_file', name: 'write_file', serverName: 'filesystem', serverId: 'filesystem' };
    const request = { id: 'call_1', tool, arguments: { path: target, content: 'acme' }, status: 'pending' };
    const pending = [{ seq: 1, type: 'mcp_tool_pending', responses: [request] }];
    expect((await acme('POST', `/v1/sessions/${sid}/messages/a2/chunks`, pending)).status).toBe(200);
    const toolCallId = governedToolCallId('acme', sid, 'a2', 'call_1');
    const { argumentsSha256 } = await eventually("acme's tool call awaits approval", async () => {
      const read = await acme('GET', `/v1/tool-calls/${toolCallId}`);
      return read.body?.status === 'awaiting_approval' ? read.body : undefined;
    });
    const acmeEvents = async () => (await acme('GET', `/v1/sessions/${sid}/events?limit=1000`)).body.events;
    const before = await acmeEvents();

    // The default tenant names its streams without a tenant part: `session-<id>` must never be read
    // as `session-acme/<id>`.
    const admin = ledger.credentials.adminKey;
    const forged = encodeURIComponent(`acme/${sid}`);
    const forgedCall = encodeURIComponent(`acme/${toolCallId}`);
    const calls: [string, string, unknown?, string?][] = [
      ['GET', `/v1/sessions/${forged}`],
      ['GET', `/v1/sessions/${forged}?at=${before.at(-1).position}`],
      ['GET', `/v1/sessions/${forged}/tree?at=${before.at(-1).position}`],
      ['GET', `/v1/sessions/${forged}/history?at=${before.at(-1).position}`],
      ['GET', `/v1/sessions/${forged}/messages/a1?at=${before.at(-1).position}`],
      ['GET', `/v1/sessions/${forged}/events`],
      ['GET', `/v1/sessions/${forged}/live`],
      ['POST', `/v1/sessions/${forged}/messages`, { role: 'user', content: 'slipped in' }],
      ['POST', `/v1/sessions/${forged}/messages/a1/chunks`, [{ seq: 6, type: 'llm_response_created' }]],
      ['POST', `/v1/sessions/${forged}/fork`, { messageId: 'a1' }],
      ['PUT', `/v1/sessions/${forged}/selection`, { childId: 'u1' }],
      ['POST', `/v1/sessions/${forged}/writers`, { writers: ['subject:default-client'] }, admin],
      ['GET', `/v1/tool-calls/${forgedCall}`],
      ['POST', `/v1/tool-calls/${forgedCall}/approve`, { argumentsSha256 }],
    ];
    for (const [method, route, body, credential] of calls) {
      const options = { credential: credential ?? keys.get('default'), body };
      const answer = await probe(ledger.baseUrl, method, route, options);
      // Refused on the id's form alone: nothing is said about whether acme has such a session.
      expect({ method, route, status: answer.status }).toEqual({ method, route, status: 400 });
      const field = route.includes('/tool-calls/') ? 'id' : 'sid';
      expect(answer.body.error).toMatchObject({ code: 'invalid_request', field });
    }
    expect(await acmeEvents()).toEqual(before);
    expect((await acme('GET', `/v1/tool-calls/${toolCallId}`)).body.status).toBe('awaiting_approval');
  });
});
