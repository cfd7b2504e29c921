import { copyFile, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { INestApplication } from '@nestjs/common';
import type { RecordedEvent } from '#event-log';
import pg from 'pg';
import { LEDGER_CONFIG, type LedgerConfig } from '../../apps/ledger/src/config/ledger-config.js';
import { createLedgerApp } from '../../apps/ledger/src/ledger-app.js';
import { LogForkError } from '../../apps/ledger/src/verifiable-log/log-fork-error.js';
import type { ProjectionRunner } from '../../apps/ledger/src/projections/projection-runner.js';
import { VerifiableLog } from '../../apps/ledger/src/verifiable-log/verifiable-log.js';
import { MERKLE_RUNNER } from '../../apps/ledger/src/verifiable-log/verifiable-log.module.js';
import { runCli } from '../support/ledger-cli.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import { recordedWithLeaves, underSigningLock } from '../support/merkle-leaves.js';
import { probe } from '../support/probe.js';

/**
 * `cli.js log-repair` (decision 0051). An event deleted after its leaf was added, before it was signed, stops signing
 * at that leaf for good: no checkpoint covers any later event. With every instance stopped, the repair drops the
 * leaves from that one on and rewinds the Merkle consumer, which adds the log's events again as they now are. It
 * never drops a signed leaf.
 */
function repairedLedger() {
  let ledger: LedgerUnderTest;
  let restarted: INestApplication | undefined;
  let db: pg.Client;
  let auditor: string;
  let config: LedgerConfig;
  beforeAll(async () => {
    ledger = await startLedger({ LEDGER_CHECKPOINT_INTERVAL_MS: '600000' });
    config = ledger.app.get<LedgerConfig>(LEDGER_CONFIG);
    db = new pg.Client({ connectionString: ledger.database.connectionString });
    await db.connect();
    auditor = await ledger.credentials.key('repair-auditor', { roles: ['auditor'] });
  });
  let stopped = false;
  afterAll(async () => {
    await db?.end();
    if (!stopped) return ledger?.close();
    await restarted?.close();
    await ledger.database.drop();
    await rm(config.dataDir, { recursive: true, force: true });
  });

  const record = (sessionId: string) => recordedWithLeaves(ledger, db, sessionId);
  const tampering = (change: () => Promise<void>) => underSigningLock(db, change);

  async function leafCount(): Promise<number> {
    return (await db.query<{ leaves: number }>('SELECT count(*)::int AS leaves FROM log_leaves')).rows[0].leaves;
  }

  const repair = () => runCli(['log-repair'], ledger.database.connectionString, config.dataDir);

  /** Stops the service (the repair refuses while an instance runs) and runs the repair. */
  async function repairedWhileStopped(): Promise<{ code: number; stdout: string; stderr: string }> {
    await ledger.app.close();
    stopped = true;
    return repair();
  }

  /** Starts the service again on the same database and data folder. */
  async function restart(): Promise<void> {
    restarted = await createLedgerApp({ config, connectionString: ledger.database.connectionString });
    await restarted.listen(0, '127.0.0.1');
  }

  async function verifiedAfterRestart(sessionId: string) {
    const baseUrl = (await restarted!.getUrl()).replace('[::1]', '127.0.0.1');
    const answer = await probe(baseUrl, 'GET', `/v1/sessions/${sessionId}/verify`, { credential: auditor });
    expect(answer.status).toBe(200);
    return answer.body;
  }

  return {
    record,
    tampering,
    leafCount,
    repair,
    repairedWhileStopped,
    restart,
    verifiedAfterRestart,
    db: () => db,
    /** A new session, its events not waited for. */
    created: (sessionId: string) => ledger.request('POST', '/v1/sessions', { id: sessionId }),
    signer: () => ledger.app.get(VerifiableLog),
    runner: () => ledger.app.get<ProjectionRunner>(MERKLE_RUNNER),
    memoryFile: () => path.join(config.dataDir, `log-last-checkpoint-${ledger.app.get(VerifiableLog).key.keyId}`),
    audited: async () => {
      const verifierKey = restarted!.get(VerifiableLog).key.verifierKey;
      const run = await runCli(['audit-log', '--key', verifierKey], ledger.database.connectionString);
      return { code: run.code, report: JSON.parse(run.stdout) as Record<string, unknown> };
    },
  };
}

describe('cli.js log-repair after an unsigned event was deleted', () => {
  const {
    record,
    tampering,
    leafCount,
    repair,
    repairedWhileStopped,
    restart,
    verifiedAfterRestart,
    audited,
    db,
    signer,
    runner,
  } = repairedLedger();
  let kept: readonly RecordedEvent[];
  let damaged: readonly RecordedEvent[];
  let later: readonly RecordedEvent[];
  let strangerLeaf: bigint;

  beforeAll(async () => {
    kept = await record('kept');
    await signer().signLatest();
    await tampering(async () => {
      damaged = await record('damaged');
      await db().query('DELETE FROM event_log_events WHERE position = $1', [damaged[1].position.toString()]);
    });
    later = await record('later');
    await expect(signer().signLatest()).rejects.toBeInstanceOf(LogForkError);
    strangerLeaf = (await signer().lastSigned())!.treeSize;
  });

  it('is refused while an instance runs, even one not leading the Merkle consumer, and changes nothing', async () => {
    const leaves = await leafCount();
    // Its consumer stopped: the consumer's lead is free, but the instance's commits could still be fed to it.
    await runner().stop();
    const run = await repair();
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('an instance is running the service: stop every instance of the service first');
    expect(run.stdout).toBe('');
    expect(await leafCount()).toBe(leaves);
  });

  it('drops the leaves from the deleted event on; they are added again from the log, and signing goes on', async () => {
    const leaves = BigInt(await leafCount());
    const run = await repairedWhileStopped();
    expect(run.stderr).toBe('');
    expect(JSON.parse(run.stdout)).toEqual({
      treeSize: String(leaves),
      dropped: String(leaves - strangerLeaf),
      removed: expect.any(Number),
      firstDropped: {
        leafIndex: String(strangerLeaf),
        position: String(damaged[1].position),
        stream: 'session-damaged',
        revision: '1',
        eventHash: damaged[1].metadata.hash,
      },
    });
    expect(await leafCount()).toBe(Number(strangerLeaf));
    // Nothing more to drop: a second run changes nothing.
    expect(JSON.parse((await repair()).stdout)).toEqual({ treeSize: String(strangerLeaf), dropped: '0', removed: 0 });

    await restart();
    expect(await verifiedAfterRestart('later')).toMatchObject({ ok: true, checkedEvents: later.length });
    expect(await verifiedAfterRestart('kept')).toMatchObject({ ok: true, checkedEvents: kept.length });
    // The deletion is not hidden: the session it was cut from breaks where its chain does.
    const cut = await verifiedAfterRestart('damaged');
    expect(cut).toMatchObject({
      ok: false,
      firstBroken: { position: damaged[2].position.toString(), reason: 'missing_event' },
    });
    // Every event but the deleted one has its leaf again, signed; the audit of the whole log names the cut too.
    expect(await leafCount()).toBe(Number(leaves) - 1);
    expect(await audited()).toMatchObject({
      code: 1,
      report: {
        ok: false,
        treeSize: String(leaves - 1n),
        firstBroken: {
          leafIndex: String(strangerLeaf),
          position: damaged[2].position.toString(),
          reason: 'missing_event',
        },
      },
    });
  });
});

describe('cli.js log-repair over a signed leaf that is not the log', () => {
  const { record, tampering, leafCount, repairedWhileStopped, db, signer, memoryFile } = repairedLedger();

  it('refuses, naming the checkpoint that signed it, and drops nothing', async () => {
    await record('first');
    await signer().signLatest();
    const olderMemory = `${memoryFile()}.older`;
    await copyFile(memoryFile(), olderMemory);
    const signed = await record('signed-then-deleted');
    const newest = await signer().signLatest();
    // Whoever holds the data folder puts the older memory back; whoever holds the database deletes a signed event.
    await copyFile(olderMemory, memoryFile());
    await rm(olderMemory);
    await tampering(async () => {
      await db().query('DELETE FROM event_log_events WHERE position = $1', [signed[1].position.toString()]);
    });
    const leaves = await leafCount();
    const run = await repairedWhileStopped();
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(
      new RegExp(
        `checkpoint ${newest.treeSize} \\(this key's, in the database\\) signed it, and a repair drops no signed leaf`,
      ),
    );
    expect(run.stdout).toBe('');
    expect(await leafCount()).toBe(leaves);
  });
});

/** Found by the attack review of the repair (decision 0051). */
describe('cli.js log-repair against what an insider leaves', () => {
  describe('a signer memory whose position was moved forward', () => {
    const { record, leafCount, repairedWhileStopped, signer, memoryFile } = repairedLedger();

    it('is refused, naming the memory, and drops nothing: the events it would skip keep their leaves', async () => {
      await record('before');
      await signer().signLatest();
      const skipped = await record('skipped');
      await record('after');
      const memory = JSON.parse(await readFile(memoryFile(), 'utf8')) as { note: string };
      await writeFile(memoryFile(), JSON.stringify({ ...memory, lastPosition: String(skipped.at(-1)!.position) }));
      await expect(signer().signLatest()).rejects.toBeInstanceOf(LogForkError);
      const leaves = await leafCount();
      const run = await repairedWhileStopped();
      expect(run.code).toBe(1);
      expect(run.stderr).toMatch(
        /is the event at position \d+, not at \d+ where the check from the signed checkpoint reached: is the signer's memory edited\?/,
      );
      expect(await leafCount()).toBe(leaves);
    });
  });

  describe('a tree rolled back below its signed checkpoint', () => {
    const { record, tampering, leafCount, repairedWhileStopped, signer, db } = repairedLedger();

    it('is refused: a repair does not undo a rollback', async () => {
      await record('signed');
      const signed = await signer().signLatest();
      await tampering(async () => {
        await db().query('DELETE FROM log_leaves WHERE leaf_index >= $1', [String(signed.treeSize - 2n)]);
      });
      const leaves = await leafCount();
      const run = await repairedWhileStopped();
      expect(run.code).toBe(1);
      expect(run.stderr).toContain(
        `but checkpoint ${signed.treeSize} (this key's, in the database) was signed: it was rolled back`,
      );
      expect(await leafCount()).toBe(leaves);
    });
  });

  describe('rows and nodes edited in at the ends of the leaf index', () => {
    const { record, tampering, leafCount, repairedWhileStopped, restart, verifiedAfterRestart, signer, db } =
      repairedLedger();
    const LAST_INDEX = String(2n ** 63n - 1n);

    it('are dropped with the unsigned leaves, and signing goes on', async () => {
      const kept = await record('kept');
      const signed = await signer().signLatest();
      await tampering(async () => {
        const junk = Buffer.alloc(32, 7);
        await db().query(
          `INSERT INTO log_leaves (leaf_index, position, stream_no, revision, event_hash)
           SELECT $1, $1, stream_no, 0, $2 FROM log_leaf_streams LIMIT 1`,
          [LAST_INDEX, junk],
        );
        await db().query(
          'INSERT INTO log_nodes (level, node_index, hash) VALUES (0, $1, $2), (-63, $1, $2), (32767, 1, $2), (0, -1, $2)',
          [LAST_INDEX, junk],
        );
      });
      await expect(signer().signLatest()).rejects.toThrow(/more than a checkpoint stores/);
      const run = await repairedWhileStopped();
      expect(run.stderr).toBe('');
      // The tree's size is the highest index with a row and a node; no row claims the first index dropped.
      expect(JSON.parse(run.stdout)).toEqual({
        treeSize: String(2n ** 63n),
        dropped: String(2n ** 63n - signed.treeSize),
        removed: 5,
      });
      expect(await leafCount()).toBe(Number(signed.treeSize));
      await restart();
      expect(await verifiedAfterRestart('kept')).toMatchObject({ ok: true, checkedEvents: kept.length });
    });
  });

  describe("a leaf row edited in far past the tree, claiming the log's next event", () => {
    const { record, tampering, created, repairedWhileStopped, restart, verifiedAfterRestart, signer, db } =
      repairedLedger();

    it('stopped the consumer at that event; the repair removes it, and the event gets its leaf', async () => {
      await record('kept');
      const signed = await signer().signLatest();
      await tampering(async () => {
        await db().query(
          `INSERT INTO log_leaves (leaf_index, position, stream_no, revision, event_hash)
           SELECT 1000000000000, position + 1, (SELECT min(stream_no) FROM log_leaf_streams), 0, $1 FROM event_log_head`,
          [Buffer.alloc(32, 9)],
        );
      });
      expect((await created('blocked')).status).toBe(201);
      const run = await repairedWhileStopped();
      expect(run.stderr).toBe('');
      expect(JSON.parse(run.stdout)).toEqual({ treeSize: String(signed.treeSize), dropped: '0', removed: 1 });
      await restart();
      expect(await verifiedAfterRestart('blocked')).toMatchObject({ ok: true, checkedEvents: 1 });
    });
  });
});
