import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  ed25519PrivateKey,
  openCheckpoint,
  parseVerifierKey,
  signCheckpoint,
  verifyConsistency,
  type Checkpoint,
} from '#core';
import type { EventLog, RecordedEvent } from '#event-log';
import pg from 'pg';
import { EVENT_LOG } from '../../apps/ledger/src/event-log/event-log-token.js';
import { naiveRoot } from '../../libs/core/src/testing/naive-merkle.js';
import { startEventStoreDouble, type EventStoreDouble } from '../support/eventstoredb-double/eventstoredb-double.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import { eventually, probe } from '../support/probe.js';

async function recordSession(ledger: LedgerUnderTest, sessionId: string, messages = 3): Promise<number> {
  let position = 0;
  expect((await ledger.request('POST', '/v1/sessions', { id: sessionId })).status).toBe(201);
  for (let i = 0; i < messages; i++) {
    const created = await ledger.request('POST', `/v1/sessions/${sessionId}/messages`, {
      role: 'user',
      content: `message ${i}`,
    });
    position = created.body.position;
  }
  return position;
}

async function allEvents(ledger: LedgerUnderTest): Promise<RecordedEvent[]> {
  const log = ledger.app.get<EventLog>(EVENT_LOG);
  const events: RecordedEvent[] = [];
  for (let from = 0n; ;) {
    const page = await log.readAll({ fromPosition: from, maxCount: 500 });
    events.push(...page.events);
    if (page.caughtUp || page.events.length === 0) return events;
    from = page.checkpoint;
  }
}

const leavesOf = (events: readonly RecordedEvent[]) => events.map((event) => Buffer.from(event.metadata.hash, 'hex'));

describe('the Merkle log on EventStoreDB', () => {
  let double: EventStoreDouble;
  let ledger: LedgerUnderTest;
  beforeAll(async () => {
    double = await startEventStoreDouble();
    ledger = await startLedger({
      EVENTSTORE_CONNECTION_STRING: double.connectionString,
      LEDGER_CHECKPOINT_INTERVAL_MS: '100',
    });
  });
  afterAll(async () => {
    await ledger?.close();
    await double?.stop();
  });

  it('holds every event of the log in commit order, and a session verifies against its checkpoint', async () => {
    await recordSession(ledger, 'on-esdb');
    const report = await ledger.request('GET', '/v1/sessions/on-esdb/verify');
    expect(report).toMatchObject({ status: 200, body: { ok: true, checkedEvents: 4 } });
    const checkpoint = openCheckpoint(
      report.body.checkpoint.note,
      parseVerifierKey((await probe(ledger.baseUrl, 'GET', '/v1/log/key')).body),
    );
    const events = await allEvents(ledger);
    expect(Number(checkpoint.treeSize)).toBeLessThanOrEqual(events.length);
    expect(checkpoint.rootHash).toEqual(naiveRoot(leavesOf(events).slice(0, Number(checkpoint.treeSize))));
  });
});

/**
 * Someone rebuilds the tree with one event changed (the real consumer rebuilds it, from a reset
 * checkpoint): the service refuses to sign anything after, and a checkpoint signed over the
 * rebuilt tree with the same key fails the consistency check against the one signed before.
 */
describe('a log rebuilt with changes', () => {
  let ledger: LedgerUnderTest;
  let db: pg.Client;
  let keyDir: string;
  let keyFile: string;
  beforeAll(async () => {
    keyDir = await mkdtemp(path.join(tmpdir(), 'log-key-'));
    keyFile = path.join(keyDir, 'signing.pem');
    await writeFile(keyFile, generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }), {
      mode: 0o600,
    });
    ledger = await startLedger({
      LEDGER_SIGNING_KEY: keyFile,
      LEDGER_LOG_ORIGIN: 'ledger.test/rebuilt',
      LEDGER_CHECKPOINT_INTERVAL_MS: '100',
    });
    db = new pg.Client({ connectionString: ledger.database.connectionString });
    await db.connect();
  });
  afterAll(async () => {
    await db?.end();
    await ledger?.close();
    await rm(keyDir, { recursive: true, force: true });
  });

  it('gets no checkpoint from the service, and a forged one does not extend the checkpoint pinned before', async () => {
    const verifier = parseVerifierKey((await probe(ledger.baseUrl, 'GET', '/v1/log/key')).body);
    expect(verifier.name).toBe('ledger.test/rebuilt');
    await recordSession(ledger, 'before');
    const before = await ledger.request('GET', '/v1/sessions/before/verify');
    expect(before.body.ok).toBe(true);
    const pinned: Checkpoint = openCheckpoint(before.body.checkpoint.note, verifier);

    // The rebuild: one early event's hash changes, the tree tables are emptied and the consumer's checkpoint reset.
    const changed = (await allEvents(ledger))[1];
    await db.query('BEGIN');
    await db.query(`UPDATE event_log_events SET hash = decode($2, 'hex') WHERE position = $1`, [
      changed.position.toString(),
      randomBytes(32).toString('hex'),
    ]);
    await db.query('DELETE FROM log_nodes');
    await db.query('DELETE FROM log_leaves');
    await db.query(`UPDATE projection_checkpoints SET position = 0 WHERE name = 'merkle-log'`);
    await db.query('COMMIT');
    await recordSession(ledger, 'after');
    const events = await allEvents(ledger);
    await eventually('the consumer rebuilt the tree', async () => {
      const { rows } = await db.query<{ count: string }>('SELECT count(*) FROM log_leaves');
      return Number(rows[0].count) === events.length ? true : undefined;
    });

    const after = await ledger.request('GET', '/v1/sessions/after/verify');
    expect(after.body).toMatchObject({
      ok: false,
      checkpoint: { treeSize: String(pinned.treeSize) },
      firstBroken: { reason: 'not_in_checkpoint' },
    });
    expect(
      (await probe(ledger.baseUrl, 'GET', '/v1/log/checkpoint', { credential: await ledger.credentials.key('client') }))
        .body,
    ).toBe(before.body.checkpoint.note);

    const rebuiltRoot = naiveRoot(leavesOf(events));
    const privateKey = ed25519PrivateKey(await readFile(keyFile, 'utf8'));
    const forged = openCheckpoint(
      signCheckpoint(
        { origin: verifier.name, treeSize: BigInt(events.length), rootHash: rebuiltRoot },
        {
          name: verifier.name,
          privateKey,
        },
      ),
      verifier,
    );
    const proof = await ledger.request(
      'GET',
      `/v1/log/proof/consistency?from=${pinned.treeSize}&to=${forged.treeSize}`,
    );
    expect(proof.status).toBe(200);
    const hashes = (proof.body.hashes as string[]).map((hash) => Buffer.from(hash, 'base64'));
    expect(() => verifyConsistency(pinned.treeSize, forged.treeSize, hashes, pinned.rootHash, forged.rootHash)).toThrow(
      /first root/,
    );
  });
});
