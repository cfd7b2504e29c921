import pg from 'pg';
import { loadBlockVectors, numberedChunks } from '../../libs/core/src/testing/block-vectors.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';

/** A hash over every read-model row in a fixed order: equal hashes, equal tables. */
async function readModelHash(database: pg.Client): Promise<Record<string, string>> {
  const hashes: Record<string, string> = {};
  for (const table of ['sessions', 'messages', 'message_blocks']) {
    const { rows } = await database.query<{ hash: string; count: string }>(`SELECT md5(coalesce(string_agg(to_jsonb(t)::text, '|' ORDER BY t.id), '')) AS hash, count(*) AS count FROM ${table} t`);
    hashes[table] = `${rows[0]!.count}:${rows[0]!.hash}`;
  }
  return hashes;
}

describe('rebuilding the read models from the log', () => {
  let ledger: LedgerUnderTest;
  let database: pg.Client;
  beforeAll(async () => {
    ledger = await startLedger();
    database = new pg.Client({ connectionString: ledger.database.connectionString });
    await database.connect();
  });
  afterAll(async () => {
    await database.end();
    await ledger.close();
  });

  it('gives rows equal to the live ones, keeps serving reads meanwhile, and the live projection carries on after the swap', async () => {
    let last = 0;
    let sessionId = '';
    let messageId = '';
    for (const vector of loadBlockVectors()) {
      sessionId = (await ledger.request('POST', '/v1/sessions', { title: vector.file })).body.id;
      await ledger.request('POST', `/v1/sessions/${sessionId}/messages`, { role: 'user', content: 'q' });
      messageId = (await ledger.request('POST', `/v1/sessions/${sessionId}/messages`, { role: 'assistant' })).body.id;
      last = (await ledger.request('POST', `/v1/sessions/${sessionId}/messages/${messageId}/chunks`, numberedChunks(vector))).body.position;
    }
    expect((await ledger.request('GET', `/v1/sessions/${sessionId}?minPosition=${last}`)).status).toBe(200);
    const live = await readModelHash(database);
    expect(Number(live.message_blocks!.split(':')[0])).toBeGreaterThan(20);

    let reading = true;
    const readStatuses: number[] = [];
    const reader = (async () => {
      while (reading) readStatuses.push((await ledger.request('GET', `/v1/sessions/${sessionId}`)).status);
    })();
    const rebuilt = await ledger.request('POST', '/v1/admin/rebuild', undefined, undefined, 'admin');
    reading = false;
    await reader;
    expect(rebuilt).toMatchObject({ status: 200, body: { position: last } });
    expect(rebuilt.body.events).toBeGreaterThan(100);
    expect(readStatuses.length).toBeGreaterThan(0);
    expect(readStatuses.every((status) => status === 200)).toBe(true);
    expect(await readModelHash(database)).toEqual(live);

    // A new response after the swap reaches the rebuilt tables through the live projection.
    const assistant = (await ledger.request('POST', `/v1/sessions/${sessionId}/messages`, { role: 'assistant' })).body.id;
    const after = await ledger.request('POST', `/v1/sessions/${sessionId}/messages/${assistant}/chunks`, [
      { seq: 1, type: 'text.start' },
      { seq: 2, type: 'text.delta', text: 'after the rebuild' },
    ]);
    const read = await ledger.request('GET', `/v1/sessions/${sessionId}/messages/${assistant}?minPosition=${after.body.position}`);
    expect(read.body.blocks).toMatchObject([{ type: 'main_text', status: 'streaming', content: 'after the rebuild' }]);
  });
});
