import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { INestApplication } from '@nestjs/common';
import { openCheckpoint, parseVerifierKey } from '#core';
import { loadConfig } from '../../apps/ledger/src/config/ledger-config.js';
import { createLedgerApp } from '../../apps/ledger/src/ledger-app.js';
import { runCli } from '../support/ledger-cli.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import { probe } from '../support/probe.js';

/**
 * The signing key rotated (decision 0050): an instance with a new key on the database the old key signed, the
 * tree not grown since. Before, the new key could not store a checkpoint of the size the old one last signed, and
 * verify opened the old key's checkpoint with the new key: a 500 until the tree grew.
 */
describe('a signing key rotated over a signed log', () => {
  let ledger: LedgerUnderTest;
  let rotated: INestApplication;
  let rotatedUrl: string;
  let rotatedDataDir: string;
  let auditor: string;
  beforeAll(async () => {
    ledger = await startLedger({ LEDGER_CHECKPOINT_INTERVAL_MS: '600000' });
    auditor = await ledger.credentials.key('rotation-auditor', { roles: ['auditor'] });
    expect((await ledger.request('POST', '/v1/sessions', { id: 'before-rotation' })).status).toBe(201);
    const created = await ledger.request('POST', '/v1/sessions/before-rotation/messages', {
      role: 'user',
      content: 'signed with the old key',
    });
    expect(created.status).toBe(201);
    // A data folder of its own: a new key is generated there on the first start.
    rotatedDataDir = await mkdtemp(path.join(tmpdir(), 'rotated-key-'));
    const config = loadConfig({
      LOG_LEVEL: 'silent',
      LEDGER_DATA_DIR: rotatedDataDir,
      LEDGER_CHECKPOINT_INTERVAL_MS: '600000',
    });
    rotated = await createLedgerApp({ config, connectionString: ledger.database.connectionString });
    await rotated.listen(0, '127.0.0.1');
    rotatedUrl = (await rotated.getUrl()).replace('[::1]', '127.0.0.1');
  });
  afterAll(async () => {
    await rotated?.close();
    await ledger?.close();
    await rm(rotatedDataDir, { recursive: true, force: true });
  });

  const get = (baseUrl: string, route: string) => probe(baseUrl, 'GET', route, { credential: auditor });
  const verifierOf = async (baseUrl: string) => parseVerifierKey((await get(baseUrl, '/v1/log/key')).body as string);

  it('verifies against a checkpoint of the new key at the size the old key signed, and serves each its own', async () => {
    const old = await get(ledger.baseUrl, '/v1/sessions/before-rotation/verify');
    expect(old.body).toMatchObject({ ok: true });
    const oldCheckpoint = openCheckpoint(old.body.checkpoint.note, await verifierOf(ledger.baseUrl));

    const [oldKey, newKey] = [await verifierOf(ledger.baseUrl), await verifierOf(rotatedUrl)];
    expect(newKey.keyId).not.toBe(oldKey.keyId);
    const after = await get(rotatedUrl, '/v1/sessions/before-rotation/verify');
    expect(after.status).toBe(200);
    expect(after.body).toMatchObject({ ok: true });
    const newCheckpoint = openCheckpoint(after.body.checkpoint.note, newKey);
    expect(newCheckpoint.treeSize).toBe(oldCheckpoint.treeSize);
    expect(newCheckpoint.rootHash).toEqual(oldCheckpoint.rootHash);

    // Each instance serves the checkpoints its own key signed, newest or by size.
    for (const [baseUrl, key] of [
      [ledger.baseUrl, oldKey],
      [rotatedUrl, newKey],
    ] as const) {
      for (const route of ['/v1/log/checkpoint', `/v1/log/checkpoint?treeSize=${oldCheckpoint.treeSize}`]) {
        const served = await get(baseUrl, route);
        expect(served.status).toBe(200);
        expect(openCheckpoint(served.body as string, key).treeSize).toBe(oldCheckpoint.treeSize);
      }
    }
  });

  it('is audited on the command line with either key pinned', async () => {
    for (const baseUrl of [ledger.baseUrl, rotatedUrl]) {
      const key = ((await get(baseUrl, '/v1/log/key')).body as string).trim();
      const run = await runCli(['audit-log', '--key', key], ledger.database.connectionString);
      expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' });
      expect(JSON.parse(run.stdout)).toMatchObject({ ok: true });
    }
  });
});
