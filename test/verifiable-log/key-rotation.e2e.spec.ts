import { execFileSync } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { INestApplication } from '@nestjs/common';
import { openCheckpoint, parseVerifierKey } from '#core';
import pg from 'pg';
import { LEDGER_CONFIG, loadConfig, type LedgerConfig } from '../../apps/ledger/src/config/ledger-config.js';
import { createLedgerApp } from '../../apps/ledger/src/ledger-app.js';
import { VerifiableLog } from '../../apps/ledger/src/verifiable-log/verifiable-log.js';
import { runCli } from '../support/ledger-cli.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import { rewriteWithLeaves } from '../support/log-tamper.js';
import { recordedWithLeaves, underSigningLock } from '../support/merkle-leaves.js';
import { probe } from '../support/probe.js';

/**
 * A ledger whose signing key is then rotated (decision 0050): a second instance on the same database with a new
 * key, generated in a data folder of its own, or set by `LEDGER_SIGNING_KEY` beside the old key's data folder (whose
 * memory of its last checkpoint stays there). Signing is on demand (verify, or the test).
 */
function rotation(dataFolder: 'new' | 'kept') {
  let ledger: LedgerUnderTest;
  let db: pg.Client;
  let auditor: string;
  let rotated: INestApplication | undefined;
  let rotatedUrl = '';
  const folders: string[] = [];
  beforeAll(async () => {
    ledger = await startLedger({ LEDGER_CHECKPOINT_INTERVAL_MS: '600000' });
    db = new pg.Client({ connectionString: ledger.database.connectionString });
    await db.connect();
    auditor = await ledger.credentials.key('rotation-auditor', { roles: ['auditor'] });
  });
  afterAll(async () => {
    await rotated?.close();
    await db?.end();
    await ledger?.close();
    for (const folder of folders) await rm(folder, { recursive: true, force: true });
  });

  /** A session of three events, once the Merkle consumer has added their leaves (a signing then sees them). */
  const record = (sessionId: string) => recordedWithLeaves(ledger, db, sessionId);

  /** Starts the instance with the new key (it signs once as it starts); its base URL. */
  async function rotate(): Promise<string> {
    const folder = await mkdtemp(path.join(tmpdir(), 'rotated-key-'));
    folders.push(folder);
    const keyFile = path.join(folder, 'new-signing-key.pem');
    const pem = generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' });
    await writeFile(keyFile, pem, { mode: 0o600 });
    const config = loadConfig({
      LOG_LEVEL: 'silent',
      LEDGER_CHECKPOINT_INTERVAL_MS: '600000',
      ...(dataFolder === 'new'
        ? { LEDGER_DATA_DIR: folder }
        : { LEDGER_DATA_DIR: ledger.app.get<LedgerConfig>(LEDGER_CONFIG).dataDir, LEDGER_SIGNING_KEY: keyFile }),
    });
    await rotated?.close();
    rotated = await createLedgerApp({ config, connectionString: ledger.database.connectionString });
    await rotated.listen(0, '127.0.0.1');
    rotatedUrl = (await rotated.getUrl()).replace('[::1]', '127.0.0.1');
    return rotatedUrl;
  }

  const tampering = (change: () => Promise<void>) => underSigningLock(db, change);

  const get = (baseUrl: string, route: string) => probe(baseUrl, 'GET', route, { credential: auditor });
  const verifierOf = async (baseUrl: string) => parseVerifierKey((await get(baseUrl, '/v1/log/key')).body as string);
  return {
    record,
    rotate,
    tampering,
    get,
    verifierOf,
    ledger: () => ledger,
    db: () => db,
    dataDir: () => ledger.app.get<LedgerConfig>(LEDGER_CONFIG).dataDir,
    rotatedUrl: () => rotatedUrl,
  };
}

describe('a signing key rotated over a signed log, in a new data folder', () => {
  const { record, rotate, get, verifierOf, ledger, db, rotatedUrl } = rotation('new');

  it('verifies against a checkpoint of the new key at the size the old key signed, and serves each its own', async () => {
    await record('before-rotation');
    const old = await get(ledger().baseUrl, '/v1/sessions/before-rotation/verify');
    expect(old.body).toMatchObject({ ok: true });
    const oldKey = await verifierOf(ledger().baseUrl);
    const oldCheckpoint = openCheckpoint(old.body.checkpoint.note, oldKey);

    await rotate();
    const newKey = await verifierOf(rotatedUrl());
    expect(newKey.keyId).not.toBe(oldKey.keyId);
    const after = await get(rotatedUrl(), '/v1/sessions/before-rotation/verify');
    expect(after.status).toBe(200);
    expect(after.body).toMatchObject({ ok: true });
    const newCheckpoint = openCheckpoint(after.body.checkpoint.note, newKey);
    expect(newCheckpoint.treeSize).toBe(oldCheckpoint.treeSize);
    expect(newCheckpoint.rootHash).toEqual(oldCheckpoint.rootHash);

    // Each instance serves the checkpoints its own key signed, newest or by size.
    for (const [baseUrl, key] of [
      [ledger().baseUrl, oldKey],
      [rotatedUrl(), newKey],
    ] as const) {
      for (const route of ['/v1/log/checkpoint', `/v1/log/checkpoint?treeSize=${oldCheckpoint.treeSize}`]) {
        const served = await get(baseUrl, route);
        expect(served.status).toBe(200);
        expect(openCheckpoint(served.body as string, key).treeSize).toBe(oldCheckpoint.treeSize);
      }
    }
  });

  it('is audited on the command line with either key pinned', async () => {
    for (const baseUrl of [ledger().baseUrl, rotatedUrl()]) {
      const key = ((await get(baseUrl, '/v1/log/key')).body as string).trim();
      const run = await runCli(['audit-log', '--key', key], ledger().database.connectionString);
      expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' });
      expect(JSON.parse(run.stdout)).toMatchObject({ ok: true });
    }
  });

  /** Review of decision 0050: any refusal before a new key's first checkpoint answered verify with a 500. */
  it("answers 503 while the new key can sign nothing (another key's row that the tree does not extend)", async () => {
    await record('after-the-row');
    await db().query(
      `INSERT INTO log_checkpoints (tree_size, root_hash, key_id, note) VALUES ($1, $2, 'ffffffff', 'junk')`,
      [(await ledger().app.get(VerifiableLog).treeSize()).toString(), Buffer.alloc(32)],
    );
    await expect(ledger().app.get(VerifiableLog).signLatest()).rejects.toThrow(
      /does not extend checkpoint \d+ \(the database's row of key ffffffff\)/,
    );
    const answer = await get(await rotate(), '/v1/sessions/after-the-row/verify');
    expect(answer).toMatchObject({ status: 503, body: { error: { code: 'log_unsigned' } } });
  });
});

/**
 * A new key's first signing checks the log from its first leaf, under the signing lock, before start-up went on:
 * on a long log the instance did not listen until it was done. Here another holder of the lock stands for that long
 * check: the instance starts, and records, while it waits.
 */
describe('a new key whose first signing waits for the signing lock', () => {
  const { rotate, tampering, get, verifierOf, ledger } = rotation('new');

  it('does not hold back the start: the instance records while the signing waits', async () => {
    const producer = await ledger().credentials.key('rotation-producer');
    let started = '';
    await tampering(async () => {
      started = await rotate();
      const created = await probe(started, 'POST', '/v1/sessions', {
        credential: producer,
        body: { id: 'while-signing' },
      });
      expect(created.status).toBe(201);
      // The new key has signed nothing yet: its first signing is still waiting for the lock.
      expect((await get(started, '/v1/log/checkpoint')).status).toBe(404);
    });
    const answer = await get(started, '/v1/sessions/while-signing/verify');
    expect(answer.body).toMatchObject({ ok: true });
    expect(openCheckpoint(answer.body.checkpoint.note, await verifierOf(started)).treeSize).toBeGreaterThan(0n);
  });
});

/**
 * A session rewritten with its chain, leaves and nodes under the old key's checkpoint, the old key's rows deleted,
 * then the new key started. In the same data folder the old key's memory bounds it: refused. Open (review of
 * decision 0050): in a new data folder it has nothing but the database's word for what the old key signed, checks
 * the log from the first leaf, and the rewritten chain passes that check, so it is signed. A witness holding the old
 * key's checkpoint sees the new key's first checkpoint fail the consistency proof from it.
 */
for (const dataFolder of ['kept', 'new'] as const)
  describe(`a history rewritten under a key rotated out, its rows deleted, then a new key in a ${dataFolder} data folder`, () => {
    const { record, rotate, tampering, get, ledger, db } = rotation(dataFolder);
    const open = dataFolder === 'new';

    (open ? it.failing : it)(
      `is refused${open ? ' (open)' : ': the old key remembers signing in the folder'}`,
      async () => {
        const events = await record('rewritten');
        expect((await get(ledger().baseUrl, '/v1/sessions/rewritten/verify')).body).toMatchObject({ ok: true });
        await tampering(async () => {
          await rewriteWithLeaves(db(), events, 1);
          await db().query('DELETE FROM log_checkpoints');
        });
        expect((await get(await rotate(), '/v1/sessions/rewritten/verify')).status).toBe(503);
        const { rows } = await db().query<{ count: string }>('SELECT count(*) FROM log_checkpoints');
        expect(rows[0].count).toBe('0');
      },
    );
  });

/**
 * Third review of decision 0050: with another key's rows read only up to the tree's size, a tree rolled back below
 * the old key's checkpoint and rewritten was signed by a new key in a new data folder, no row deleted. A row past
 * the tree is a rollback again.
 */
describe("a tree rolled back below a rotated-out key's checkpoint and rewritten, then a new key in a new data folder", () => {
  const { record, rotate, tampering, get, ledger, db } = rotation('new');

  it("is refused: the old key's row past the tree is a rollback", async () => {
    const victim = await record('victim');
    const tail = await record('tail');
    expect((await get(ledger().baseUrl, '/v1/sessions/tail/verify')).body).toMatchObject({ ok: true });
    await tampering(async () => {
      await db().query('DELETE FROM log_leaves WHERE position >= $1', [tail[0].position.toString()]);
      await rewriteWithLeaves(db(), victim, 1);
    });
    expect((await get(await rotate(), '/v1/sessions/victim/verify')).status).toBe(503);
  });
});

describe('a signing key rotated in the same data folder, over a signed event deleted long ago', () => {
  const { record, rotate, get, verifierOf, ledger, db } = rotation('kept');

  it("starts from the old key's last checkpoint, not the first leaf, and signs on", async () => {
    const events = await record('old-deletion');
    expect((await get(ledger().baseUrl, '/v1/sessions/old-deletion/verify')).body).toMatchObject({ ok: true });
    await db().query('DELETE FROM event_log_events WHERE position = $1', [events[1].position.toString()]);
    await record('later');
    const rotatedUrl = await rotate();
    const answer = await get(rotatedUrl, '/v1/sessions/later/verify');
    expect(answer.body).toMatchObject({ ok: true });
    expect(openCheckpoint(answer.body.checkpoint.note, await verifierOf(rotatedUrl)).treeSize).toBe(
      await ledger().app.get(VerifiableLog).treeSize(),
    );
  });
});

/** Second review of decision 0050: what operators leave in a data folder that holds more than one key's memory. */
describe('the memory files of rotated keys, as operators leave them', () => {
  const { record, rotate, get, ledger, db, dataDir } = rotation('kept');
  const signer = () => ledger().app.get(VerifiableLog);

  it('one that cannot be read stops signing and is named; verify answers from what was signed', async () => {
    await record('before-damage');
    const signed = await signer().signLatest();
    const damaged = path.join(dataDir(), 'log-last-checkpoint-00000000');
    await writeFile(damaged, '');
    await record('after-damage');
    await expect(signer().signLatest()).rejects.toThrow(/log-last-checkpoint-00000000 cannot be read/);
    expect((await get(ledger().baseUrl, '/v1/sessions/after-damage/verify')).body).toMatchObject({
      ok: false,
      checkpoint: { treeSize: signed.treeSize.toString() },
      firstBroken: { reason: 'not_in_checkpoint' },
    });
    await rm(damaged);
    expect((await get(ledger().baseUrl, '/v1/sessions/after-damage/verify')).body).toMatchObject({ ok: true });
  });

  it('a FIFO, a symbolic link or an outsized file in its place is named at once: it does not hold the signing lock', async () => {
    await record('beside-a-fifo');
    const planted = path.join(dataDir(), 'log-last-checkpoint-0000f1f0');
    execFileSync('mkfifo', [planted]);
    try {
      await expect(signer().signLatest()).rejects.toThrow(
        /log-last-checkpoint-0000f1f0 cannot be read: it is not a regular file/,
      );
    } finally {
      await rm(planted);
    }
    // A symbolic link, as to /proc/self/pagemap (a "regular file" that states no size and reads on for gigabytes).
    await symlink('/proc/self/pagemap', planted);
    await expect(signer().signLatest()).rejects.toThrow(
      /log-last-checkpoint-0000f1f0 cannot be read: it is a symbolic link/,
    );
    await rm(planted);
    await writeFile(planted, 'x'.repeat(100_000));
    await expect(signer().signLatest()).rejects.toThrow(
      /log-last-checkpoint-0000f1f0 cannot be read: it holds more than 65536 bytes/,
    );
    await rm(planted);
    expect((await get(ledger().baseUrl, '/v1/sessions/beside-a-fifo/verify')).body).toMatchObject({ ok: true });
  });

  it('one of another deployment stops signing, and is named: its key, or the tree it does not extend', async () => {
    const copied = path.join(dataDir(), 'log-last-checkpoint-0badc0de');
    const signature = (keyId: string) => Buffer.from(`${keyId}${'00'.repeat(64)}`, 'hex').toString('base64');
    const note = (keyId: string) =>
      `block-ledger/staging\n2\n${Buffer.alloc(32, 3).toString('base64')}\n\n— block-ledger/staging ${signature(keyId)}\n`;
    await writeFile(copied, JSON.stringify({ note: note('00000000'), lastPosition: '2' }));
    await record('beside-the-copy');
    await expect(signer().signLatest()).rejects.toThrow(/log-last-checkpoint-0badc0de.*no signature of key 0badc0de/);
    await writeFile(copied, JSON.stringify({ note: note('0badc0de'), lastPosition: '2' }));
    await expect(signer().signLatest()).rejects.toThrow(
      /does not extend checkpoint 2 \(remembered in .*log-last-checkpoint-0badc0de\)/,
    );
    await rm(copied);
    expect((await get(ledger().baseUrl, '/v1/sessions/beside-the-copy/verify')).body).toMatchObject({ ok: true });
  });

  it('the newest position any key kept in the folder is where a key starts: A, then B, then A again', async () => {
    await record('a-signed');
    await signer().signLatest();
    const keyB = await rotate();
    const bSigned = await record('b-signed');
    expect((await get(keyB, '/v1/sessions/b-signed/verify')).body).toMatchObject({ ok: true });
    await db().query('DELETE FROM event_log_events WHERE position = $1', [bSigned[1].position.toString()]);
    await record('later');
    expect((await get(keyB, '/v1/sessions/later/verify')).body).toMatchObject({ ok: true });
    expect((await get(ledger().baseUrl, '/v1/sessions/later/verify')).body).toMatchObject({ ok: true });
  });
});
