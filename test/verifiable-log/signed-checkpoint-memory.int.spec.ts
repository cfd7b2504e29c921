import { lstat, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { signCheckpoint } from '#core';
import type { VerifiableLogConfig } from '../../apps/ledger/src/config/ledger-config.js';
import { loadLogSigningKey, type LogSigningKey } from '../../apps/ledger/src/verifiable-log/log-signing-key.js';
import { SignedCheckpointMemory } from '../../apps/ledger/src/verifiable-log/signed-checkpoint-memory.js';

/** The signer's memory file, as two signings of one process write it (decision 0051, second attack review). */
describe("the signer's memory", () => {
  let dataDir: string;
  let key: LogSigningKey;
  let memory: SignedCheckpointMemory;
  const config: VerifiableLogConfig = { signingKeyFile: undefined, origin: undefined, checkpointIntervalMs: 1_000 };
  const note = (treeSize: bigint) =>
    signCheckpoint({ origin: key.signer.name, treeSize, rootHash: Buffer.alloc(32, Number(treeSize)) }, key.signer);
  const file = () => path.join(dataDir, `log-last-checkpoint-${key.keyId}`);

  beforeEach(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), 'signer-memory-'));
    key = await loadLogSigningKey(config, dataDir);
    memory = new SignedCheckpointMemory(dataDir, key);
  });
  afterEach(async () => {
    await rm(dataDir, { recursive: true, force: true });
  });

  it('is never moved back: a signing overtaken by the next, finishing after it, leaves the larger tree', async () => {
    await Promise.all([memory.remember(note(8n), 20n), memory.remember(note(5n), 12n)]);
    expect(JSON.parse(await readFile(file(), 'utf8'))).toEqual({ note: note(8n), lastPosition: '20' });
    expect((await memory.recall())?.checkpoint.treeSize).toBe(8n);
    expect(memory.lastKnown?.checkpoint.treeSize).toBe(8n);
  });

  it('is written under a name of its own, never through a link planted in the folder', async () => {
    const outside = path.join(dataDir, 'outside.txt');
    await writeFile(outside, 'untouched');
    for (const name of [`${path.basename(file())}.${process.pid}.partial`, `${path.basename(file())}.partial`])
      await symlink(outside, path.join(dataDir, name));
    await memory.remember(note(3n), 7n);
    expect(await readFile(outside, 'utf8')).toBe('untouched');
    expect((await lstat(file())).isFile()).toBe(true);
    expect((await lstat(file())).mode & 0o777).toBe(0o600);
    expect((await readdir(dataDir)).filter((name) => name.endsWith('.partial'))).toHaveLength(2);
  });
});
