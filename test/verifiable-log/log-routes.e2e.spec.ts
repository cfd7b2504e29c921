import { leafHash, openCheckpoint, parseVerifierKey, verifyConsistency, verifyInclusion, type Checkpoint } from '#core';
import pg from 'pg';
import { naiveConsistencyProof, naiveInclusionProof, naiveRoot } from '../../libs/core/src/testing/naive-merkle.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import { eventually, probe } from '../support/probe.js';

/**
 * The transparency log's routes against a naive RFC 9162 implementation over the events as the
 * database holds them: the signed root, inclusion and consistency proofs must all agree.
 */
describe('the verifiable log routes', () => {
  let ledger: LedgerUnderTest;
  let db: pg.Client;
  let auditor: string;
  beforeAll(async () => {
    ledger = await startLedger({ LEDGER_CHECKPOINT_INTERVAL_MS: '100' });
    db = new pg.Client({ connectionString: ledger.database.connectionString });
    await db.connect();
    auditor = await ledger.credentials.key('log-auditor', { roles: ['auditor'] });
  });
  afterAll(async () => {
    await db?.end();
    await ledger?.close();
  });

  const get = (path: string, credential: string | null = auditor) =>
    probe(ledger.baseUrl, 'GET', path, { credential: credential ?? undefined });

  async function record(sessionId: string, messages: number): Promise<number> {
    let position = (await ledger.request('POST', '/v1/sessions', { id: sessionId })).body.position as number;
    for (let i = 0; i < messages; i++) {
      const created = await ledger.request('POST', `/v1/sessions/${sessionId}/messages`, {
        role: 'user',
        content: `message ${i}`,
      });
      expect(created.status).toBe(201);
      position = created.body.position;
    }
    return position;
  }

  /** The leaves as a naive reader sees them: every event's stored hash, in position order. */
  async function leavesInDatabase(): Promise<Buffer[]> {
    const { rows } = await db.query<{ hash: string }>('SELECT hash FROM event_log_records ORDER BY position');
    return rows.map((row) => Buffer.from(row.hash, 'hex'));
  }

  async function verifier() {
    const key = await probe(ledger.baseUrl, 'GET', '/v1/log/key');
    expect(key).toMatchObject({ status: 200 });
    expect(key.headers.get('content-type')).toMatch(/^text\/plain/);
    return parseVerifierKey(key.body);
  }

  /** The latest checkpoint, once it covers every event up to `position`. */
  async function checkpointCovering(position: number): Promise<{ note: string; checkpoint: Checkpoint }> {
    const vkey = await verifier();
    const { rows } = await db.query<{ count: string }>('SELECT count(*) FROM event_log_events WHERE position <= $1', [
      position,
    ]);
    return eventually(`a checkpoint covers position ${position}`, async () => {
      const answer = await get('/v1/log/checkpoint');
      const checkpoint = openCheckpoint(answer.body, vkey);
      return checkpoint.treeSize >= BigInt(rows[0].count) ? { note: answer.body as string, checkpoint } : undefined;
    });
  }

  it('signs checkpoints whose roots, inclusion and consistency proofs agree with a naive implementation', async () => {
    const first = await checkpointCovering(await record('log-a', 3));
    const second = await checkpointCovering(await record('log-b', 5));
    const leaves = await leavesInDatabase();
    const size1 = Number(first.checkpoint.treeSize);
    const size2 = Number(second.checkpoint.treeSize);
    expect(size2).toBeGreaterThan(size1);
    expect(first.checkpoint.rootHash).toEqual(naiveRoot(leaves.slice(0, size1)));
    expect(second.checkpoint.rootHash).toEqual(naiveRoot(leaves.slice(0, size2)));
    expect(first.note.split('\n')[0]).toBe((await verifier()).name);

    // Both checkpoints stay served by size.
    expect((await get(`/v1/log/checkpoint?treeSize=${size1}`)).body).toBe(first.note);

    const consistency = await get(`/v1/log/proof/consistency?from=${size1}&to=${size2}`);
    expect(consistency).toMatchObject({ status: 200, body: { from: String(size1), to: String(size2) } });
    const hashes = (consistency.body.hashes as string[]).map((hash) => Buffer.from(hash, 'base64'));
    expect(hashes).toEqual(naiveConsistencyProof(size1, leaves.slice(0, size2)));
    verifyConsistency(BigInt(size1), BigInt(size2), hashes, first.checkpoint.rootHash, second.checkpoint.rootHash);

    const { rows } = await db.query<{ position: string }>('SELECT position FROM event_log_events ORDER BY position');
    for (const [index, { position }] of rows.slice(0, size2).entries()) {
      const inclusion = await get(`/v1/log/proof/inclusion?position=${position}&treeSize=${size2}`);
      expect(inclusion).toMatchObject({
        status: 200,
        body: { position, leafIndex: String(index), treeSize: String(size2) },
      });
      const proof = (inclusion.body.hashes as string[]).map((hash) => Buffer.from(hash, 'base64'));
      expect(proof).toEqual(naiveInclusionProof(index, leaves.slice(0, size2)));
      verifyInclusion(leafHash(leaves[index]), BigInt(index), BigInt(size2), proof, second.checkpoint.rootHash);
    }
  });

  it('serves the key to anyone, and checkpoints and proofs to auditors only', async () => {
    expect((await get('/v1/log/key', null)).status).toBe(200);
    const reader = await ledger.credentials.key('log-reader', { roles: ['reader', 'producer', 'reviewer'] });
    const otherTenantAuditor = await ledger.credentials.key('globex-auditor', { tenant: 'globex', roles: ['auditor'] });
    for (const path of [
      '/v1/log/checkpoint',
      '/v1/log/proof/inclusion?position=1&treeSize=1',
      '/v1/log/proof/consistency?from=1&to=1',
    ]) {
      expect({ path, status: (await get(path, null)).status }).toEqual({ path, status: 401 });
      expect({ path, status: (await get(path, reader)).status }).toEqual({ path, status: 403 });
      expect({ path, status: (await get(path, otherTenantAuditor)).status }).toEqual({ path, status: 200 });
    }
  });

  it('refuses bad sizes and positions naming the field', async () => {
    await record('log-c', 1);
    const { rows } = await db.query<{ count: string }>('SELECT count(*) FROM log_leaves');
    const beyond = Number(rows[0].count) + 1000;
    const cases: [string, number, string][] = [
      ['/v1/log/checkpoint?treeSize=abc', 400, 'treeSize'],
      ['/v1/log/checkpoint?treeSize=999999', 404, 'treeSize'],
      ['/v1/log/proof/inclusion', 400, 'position'],
      ['/v1/log/proof/inclusion?position=-1&treeSize=1', 400, 'position'],
      ['/v1/log/proof/inclusion?position=1&treeSize=1e3', 400, 'treeSize'],
      ['/v1/log/proof/inclusion?position=99999999999&treeSize=1', 404, 'position'],
      [`/v1/log/proof/inclusion?position=1&treeSize=${beyond}`, 422, 'treeSize'],
      ['/v1/log/proof/inclusion?position=1&treeSize=0', 400, 'treeSize'],
      ['/v1/log/proof/inclusion?position=1&treeSize=99999999999999999999', 400, 'treeSize'],
      ['/v1/log/proof/consistency?from=2', 400, 'to'],
      ['/v1/log/proof/consistency?from=0&to=1', 400, 'from'],
      ['/v1/log/proof/consistency?from=3&to=2', 400, 'to'],
      [`/v1/log/proof/consistency?from=1&to=${beyond}`, 422, 'to'],
    ];
    for (const [path, status, field] of cases) {
      const answer = await get(path);
      expect({ path, status: answer.status, field: answer.body?.error?.field }).toEqual({ path, status, field });
      expect(answer.body.error.message).toEqual(expect.any(String));
    }
  });
});
