import { generateKeyPairSync } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openCheckpoint, parseVerifierKey, signCheckpoint, verifierKeyOf, type NoteSigner } from '#core';
import type { EventLog } from '#event-log';
import pg from 'pg';
import { EVENT_LOG } from '../../apps/ledger/src/event-log/event-log-token.js';
import { VerifiableLog } from '../../apps/ledger/src/verifiable-log/verifiable-log.js';
import { runCli } from '../support/ledger-cli.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import { rewriteWithLeaves } from '../support/log-tamper.js';
import { underSigningLock } from '../support/merkle-leaves.js';

/**
 * `cli.js audit-log`: every leaf of a signed checkpoint against the log's events, with a verifier key (and
 * optionally a checkpoint) the auditor pinned. The attacks it names are in insider-attacks.e2e.spec.ts.
 */
describe('the log audit on the command line', () => {
  let ledger: LedgerUnderTest;
  let db: pg.Client;
  let files: string;
  beforeAll(async () => {
    ledger = await startLedger({ LEDGER_CHECKPOINT_INTERVAL_MS: '100' });
    db = new pg.Client({ connectionString: ledger.database.connectionString });
    await db.connect();
    files = await mkdtemp(path.join(tmpdir(), 'log-audit-'));
  });
  afterAll(async () => {
    await db?.end();
    await ledger?.close();
    await rm(files, { recursive: true, force: true });
  });

  const log = () => ledger.app.get(VerifiableLog);
  const audit = (...args: string[]) => runCli(['audit-log', ...args], ledger.database.connectionString);

  async function record(sessionId: string): Promise<void> {
    expect((await ledger.request('POST', '/v1/sessions', { id: sessionId })).status).toBe(201);
    for (const content of ['one', 'two']) {
      const created = await ledger.request('POST', `/v1/sessions/${sessionId}/messages`, { role: 'user', content });
      expect(created.status).toBe(201);
    }
  }

  /** A checkpoint signed now, covering every event recorded so far, kept in a file as a witness would. */
  async function pinCheckpoint(name: string): Promise<{ file: string; treeSize: bigint; lastPosition: bigint }> {
    const head = BigInt(
      (await db.query<{ head: string }>('SELECT max(position) AS head FROM event_log_events')).rows[0].head,
    );
    const signed = await log().checkpointCovering(head);
    const file = path.join(files, name);
    await writeFile(file, signed.note);
    return { file, treeSize: signed.treeSize, lastPosition: head };
  }

  function foreignSigner(name: string): NoteSigner {
    return { name, privateKey: generateKeyPairSync('ed25519').privateKey };
  }

  it('checks every leaf of the latest checkpoint, or of one pinned, and says how far it got', async () => {
    await record('audited-a');
    const pinned = await pinCheckpoint('a.checkpoint');
    await record('audited-b');
    const latest = await pinCheckpoint('b.checkpoint');
    expect(latest.treeSize).toBeGreaterThan(pinned.treeSize);
    const keyFile = path.join(files, 'ledger.vkey');
    await writeFile(keyFile, `${log().key.verifierKey}\n`);

    const onLatest = await audit('--key', keyFile);
    expect(onLatest).toMatchObject({ code: 0, stderr: '' });
    const { treeSize } = (await log().lastSigned())!;
    const { rows } = await db.query<{ position: string }>('SELECT position FROM log_leaves WHERE leaf_index = $1', [
      (treeSize - 1n).toString(),
    ]);
    expect(JSON.parse(onLatest.stdout)).toEqual({
      ok: true,
      treeSize: String(treeSize),
      lastPosition: rows[0].position,
    });
    const onPinned = await audit('--key', log().key.verifierKey, '--checkpoint', pinned.file);
    expect(onPinned).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(onPinned.stdout)).toEqual({
      ok: true,
      treeSize: String(pinned.treeSize),
      lastPosition: String(pinned.lastPosition),
    });
  });

  it('refuses a missing or malformed key, a checkpoint it cannot read or not signed by the key, and unknown flags', async () => {
    const pinned = await pinCheckpoint('c.checkpoint');
    const stranger = foreignSigner(log().key.signer.name);
    const strangerCheckpoint = path.join(files, 'stranger.checkpoint');
    const forged = { origin: stranger.name, treeSize: pinned.treeSize, rootHash: Buffer.alloc(32) };
    await writeFile(strangerCheckpoint, signCheckpoint(forged, stranger));
    const key = log().key.verifierKey;
    const refusals: [string[], RegExp][] = [
      [[], /--key is required/],
      [['--key', 'not+a+key'], /^block-ledger: --key: /],
      [['--key', path.join(files, 'absent.vkey')], /^block-ledger: --key: .*ENOENT/],
      [['--key', verifierKeyOf(stranger), '--checkpoint', pinned.file], /^block-ledger: --checkpoint: /],
      [['--key', key, '--checkpoint', strangerCheckpoint], /^block-ledger: --checkpoint: /],
      [['--key', key, '--checkpoint', path.join(files, 'absent.checkpoint')], /^block-ledger: --checkpoint: .*ENOENT/],
      [['--key', key, '--since', pinned.file], /--since/],
    ];
    for (const [args, message] of refusals) {
      const run = await audit(...args);
      expect({ args, code: run.code, stdout: run.stdout }).toEqual({ args, code: 1, stdout: '' });
      expect(run.stderr).toMatch(message);
    }
  });

  it('names a tree whose leaves are the events as stored but not what the pinned checkpoint signed', async () => {
    await record('rewritten-whole');
    const pinned = await pinCheckpoint('d.checkpoint');
    const events = await ledger.app.get<EventLog>(EVENT_LOG).readStream('session-rewritten-whole');
    // Rewrite a signed session, its leaf rows and every stored node: rows, nodes and events agree, the root does not.
    await underSigningLock(db, () => rewriteWithLeaves(db, events, 1));

    const run = await audit('--key', log().key.verifierKey, '--checkpoint', pinned.file);
    expect(run).toMatchObject({ code: 1, stderr: '' });
    expect(JSON.parse(run.stdout)).toEqual({
      ok: false,
      treeSize: String(pinned.treeSize),
      firstBroken: {
        leafIndex: null,
        position: null,
        reason: 'root_mismatch',
        expected: openCheckpoint(
          await readFile(pinned.file, 'utf8'),
          parseVerifierKey(log().key.verifierKey),
        ).rootHash.toString('base64'),
        actual: expect.any(String),
      },
    });
  });
});
