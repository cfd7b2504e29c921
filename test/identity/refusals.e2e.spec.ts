import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { INestApplication } from '@nestjs/common';
import { loadConfig } from '../../apps/ledger/src/config/ledger-config.js';
import { createLedgerApp } from '../../apps/ledger/src/ledger-app.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import { eventually, probe } from '../support/probe.js';
import { connectSse } from '../support/sse-client.js';
import { keyActor } from '../support/test-credentials.js';

/** `ledger_http_refused_total` by `<status> <reason>`, from /metrics as an admin (the bootstrap one unless given). */
async function refusals(ledger: LedgerUnderTest, credential = ledger.credentials.adminKey) {
  const metrics = await probe(ledger.baseUrl, 'GET', '/metrics', { credential });
  expect(metrics.status).toBe(200);
  const counted = new Map<string, number>();
  for (const line of String(metrics.body).split('\n')) {
    const match = /^ledger_http_refused_total\{(.*)\} (\d+)$/.exec(line);
    if (!match) continue;
    const pairs = [...match[1].matchAll(/(\w+)="([^"]*)"/g)].map(([, name, value]) => [name, value]);
    const labels = Object.fromEntries(pairs);
    counted.set(`${labels.status} ${labels.reason}`, Number(match[2]));
  }
  return counted;
}

/** How much each count grew from `before` to `after` (only those that did). */
function growth(before: Map<string, number>, after: Map<string, number>): Record<string, number> {
  const deltas = [...after].map(([key, value]) => [key, value - (before.get(key) ?? 0)] as const);
  return Object.fromEntries(deltas.filter(([, delta]) => delta !== 0));
}

const keyId = (key: string) => /^blk_([a-z0-9]{16})_/.exec(key)![1];

describe('the actor is the credential, and refusals are counted', () => {
  let ledger: LedgerUnderTest;
  beforeAll(async () => {
    ledger = await startLedger();
  });
  afterAll(async () => {
    await ledger?.close();
  });

  it('records the key as the actor whatever X-Ledger-Actor claims', async () => {
    const credential = await ledger.credentials.key('claimant');
    const as = (method: string, route: string, body: unknown, claimed: string) =>
      probe(ledger.baseUrl, method, route, { credential, body, headers: { 'x-ledger-actor': claimed } });
    const sessionId = (await as('POST', '/v1/sessions', {}, 'system:policy')).body.id;
    await as('POST', `/v1/sessions/${sessionId}/messages`, { id: 'a1', role: 'assistant' }, 'policy');
    const chunks = [{ seq: 1, type: 'llm_response_created' }];
    await as('POST', `/v1/sessions/${sessionId}/messages/a1/chunks`, chunks, 'system:governance-saga');
    const events = await probe(ledger.baseUrl, 'GET', `/v1/sessions/${sessionId}/events`, { credential });
    expect(events.body.events.map((event: { metadata: { actor: string } }) => event.metadata.actor)).toEqual([
      keyActor('claimant'),
      keyActor('claimant'),
      keyActor('claimant'),
    ]);
  });

  it('refuses a request with two authorization headers, or two different credentials, whichever is valid', async () => {
    const [valid, other] = [await ledger.credentials.key('first-line'), await ledger.credentials.key('second-line')];
    const { port } = new URL(ledger.baseUrl);
    /** Headers as a flat list of names and values, each pair its own line (Node then adds no `host` itself). */
    const send = (method: string, authorization: string[], body?: string) =>
      new Promise<number>((resolve, reject) => {
        const headers = ['host', `127.0.0.1:${port}`, ...authorization.flatMap((value) => ['authorization', value])];
        if (body) headers.push('content-type', 'application/json');
        const request = http.request({ host: '127.0.0.1', port, method, path: '/v1/sessions', headers }, (response) => {
          response.resume();
          resolve(response.statusCode!);
        });
        request.on('error', reject);
        request.end(body);
      });
    for (const lines of [
      [`Bearer ${valid}`, `Bearer ${other}`],
      [`Bearer ${valid}`, 'Bearer forged'],
      ['Bearer forged', `Bearer ${valid}`],
    ]) {
      expect(await send('GET', lines)).toBe(401);
      expect(await send('POST', lines, '{}')).toBe(401);
    }
    expect(await send('GET', [`Bearer ${valid}`])).toBe(200);
    // Both headers, naming two credentials: neither is chosen. The same one twice is one credential.
    const both = (apiKey: string) =>
      probe(ledger.baseUrl, 'GET', '/v1/sessions', { credential: valid, headers: { 'x-api-key': apiKey } });
    for (const apiKey of [other, 'forged']) expect((await both(apiKey)).status).toBe(401);
    expect((await both(valid)).status).toBe(200);
  });

  it('counts missing, malformed, unknown, revoked credentials, a missing role, a refused writer', async () => {
    const reader = await ledger.credentials.key('only-reader', { roles: ['reader'] });
    const revoked = await ledger.credentials.mint('to-revoke');
    const admin = { credential: ledger.credentials.adminKey };
    expect((await probe(ledger.baseUrl, 'DELETE', `/v1/admin/keys/${keyId(revoked)}`, admin)).status).toBe(200);
    const owner = await ledger.credentials.key('session-owner');
    const owned = (await probe(ledger.baseUrl, 'POST', '/v1/sessions', { credential: owner, body: {} })).body.id;
    const notTheOwner = await ledger.credentials.key('not-the-owner');
    const unknown = 'blk_0123456789abcdef_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
    const before = await refusals(ledger);
    const refused = [
      await probe(ledger.baseUrl, 'GET', '/v1/tool-calls'),
      await probe(ledger.baseUrl, 'GET', '/v1/tool-calls', { authorization: 'Basic dXNlcjpwYXNz' }),
      await probe(ledger.baseUrl, 'GET', '/v1/tool-calls', { credential: unknown }),
      await probe(ledger.baseUrl, 'GET', '/v1/tool-calls', { credential: revoked }),
      await probe(ledger.baseUrl, 'POST', '/v1/sessions', { credential: reader, body: {} }),
      await probe(ledger.baseUrl, 'POST', `/v1/sessions/${owned}/messages`, {
        credential: notTheOwner,
        body: { role: 'user' },
      }),
    ];
    expect(refused.map((answer) => answer.status)).toEqual([401, 401, 401, 401, 403, 403]);
    for (const answer of refused.slice(0, 4)) {
      expect(answer.headers.get('www-authenticate')).toMatch(/^Bearer\b/);
      expect(answer.body).toEqual({ error: { code: 'unauthenticated', message: expect.any(String) } });
    }
    expect(growth(before, await refusals(ledger))).toEqual({
      '401 missing': 1,
      '401 malformed': 1,
      '401 unknown': 1,
      '401 revoked': 1,
      '403 role': 1,
      '403 not_a_writer': 1,
    });
  });

  it('refuses a revoked key on another instance when told, long before its cache entry ages', async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'ledger-second-'));
    const config = loadConfig({ LOG_LEVEL: 'silent', LEDGER_DATA_DIR: dataDir });
    const connectionString = ledger.database.connectionString;
    const second: INestApplication = await createLedgerApp({ config, connectionString });
    try {
      await second.listen(0, '127.0.0.1');
      const secondUrl = (await second.getUrl()).replace('[::1]', '127.0.0.1');
      const doomed = await ledger.credentials.mint('doomed');
      // The second instance has verified (and cached) the key before it is revoked.
      expect((await probe(secondUrl, 'GET', '/v1/tool-calls', { credential: doomed })).status).toBe(200);
      const revocation = await probe(ledger.baseUrl, 'DELETE', `/v1/admin/keys/${keyId(doomed)}`, {
        credential: ledger.credentials.adminKey,
      });
      expect(revocation).toMatchObject({
        status: 200,
        body: { revokedAt: expect.any(String), revokedBy: expect.stringMatching(/^key:/) },
      });
      expect((await probe(ledger.baseUrl, 'GET', '/v1/tool-calls', { credential: doomed })).status).toBe(401);
      await eventually(
        'the second instance refuses the revoked key',
        // Well within KEY_CACHE_MS (10 s): only the revocation's notification can make the second instance refuse.
        async () => {
          const answer = await probe(secondUrl, 'GET', '/v1/tool-calls', { credential: doomed });
          return answer.status === 401 ? answer : undefined;
        },
        2_000,
      );
    } finally {
      await second.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});

describe('per-credential request rate', () => {
  let ledger: LedgerUnderTest;
  let metricsReader: string;
  beforeAll(async () => {
    // A window long enough that no budget refills during the test.
    ledger = await startLedger({ LEDGER_RATE_LIMIT: '5', LEDGER_RATE_LIMIT_WINDOW_MS: '3600000' });
    // Every key up front: minting spends the bootstrap admin's own budget of five.
    for (const name of ['limited', 'unhurried']) await ledger.credentials.key(name);
    metricsReader = await ledger.credentials.key('metrics-reader', { roles: ['admin'] });
  });
  afterAll(async () => {
    await ledger?.close();
  });

  it('answers the request beyond the rate limit with 429 and Retry-After; another credential goes on', async () => {
    const limited = await ledger.credentials.key('limited');
    const other = await ledger.credentials.key('unhurried');
    const before = await refusals(ledger, metricsReader);
    for (let request = 1; request <= 5; request += 1) {
      expect((await probe(ledger.baseUrl, 'GET', '/v1/tool-calls', { credential: limited })).status).toBe(200);
    }
    const refused = await probe(ledger.baseUrl, 'GET', '/v1/tool-calls', { credential: limited });
    expect(refused).toMatchObject({
      status: 429,
      body: { error: { code: 'rate_limited', message: expect.any(String) } },
    });
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await probe(ledger.baseUrl, 'GET', '/v1/tool-calls', { credential: other })).status).toBe(200);
    expect(growth(before, await refusals(ledger, metricsReader))).toEqual({ '429 rate': 1 });
  });
});

describe('live connections per credential', () => {
  let ledger: LedgerUnderTest;
  beforeAll(async () => {
    ledger = await startLedger({ LEDGER_LIVE_MAX_PER_CREDENTIAL: '2' });
  });
  afterAll(async () => {
    await ledger?.close();
  });

  it('refuses a credential its third live connection while another credential still connects', async () => {
    const watcher = await ledger.credentials.key('watcher');
    const feeds = [0, 1].map(() => connectSse(`${ledger.baseUrl}/v1/events/live`, { key: watcher }));
    try {
      for (const feed of feeds) expect((await feed.opened).status).toBe(200);
      const third = await probe(ledger.baseUrl, 'GET', '/v1/events/live', { credential: watcher });
      expect(third).toMatchObject({
        status: 429,
        body: { error: { code: 'too_many_live_connections', message: expect.any(String) } },
      });
      const anotherKey = await ledger.credentials.key('another-watcher');
      const another = connectSse(`${ledger.baseUrl}/v1/events/live`, { key: anotherKey });
      feeds.push(another);
      expect((await another.opened).status).toBe(200);
    } finally {
      for (const feed of feeds) feed.close();
    }
  });

  it('holds the cap when a credential opens several session feeds at once', async () => {
    const credential = await ledger.credentials.key('eager');
    const sessionId = (await probe(ledger.baseUrl, 'POST', '/v1/sessions', { credential, body: {} })).body.id;
    const url = `${ledger.baseUrl}/v1/sessions/${sessionId}/live`;
    const feeds = Array.from({ length: 4 }, () => connectSse(url, { key: credential }));
    try {
      const statuses = await Promise.all(feeds.map(async (feed) => (await feed.opened).status));
      expect(statuses.sort()).toEqual([200, 200, 429, 429]);
    } finally {
      for (const feed of feeds) feed.close();
    }
  });

  it('counts no connection for a feed that did not open', async () => {
    const credential = await ledger.credentials.key('seeker');
    for (let attempt = 0; attempt < 3; attempt += 1) {
      const refused = await probe(ledger.baseUrl, 'GET', '/v1/sessions/no-such-session/live', { credential });
      expect(refused.status).toBe(404);
    }
    const sessionId = (await probe(ledger.baseUrl, 'POST', '/v1/sessions', { credential, body: {} })).body.id;
    const feeds = [0, 1].map(() => connectSse(`${ledger.baseUrl}/v1/sessions/${sessionId}/live`, { key: credential }));
    try {
      expect(await Promise.all(feeds.map(async (feed) => (await feed.opened).status))).toEqual([200, 200]);
    } finally {
      for (const feed of feeds) feed.close();
    }
  });
});
