import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { VerifiableLogConfig } from '../../apps/ledger/src/config/ledger-config.js';
import { GENERATED_KEY_FILE, loadLogSigningKey } from '../../apps/ledger/src/verifiable-log/log-signing-key.js';

describe('the generated checkpoint signing key', () => {
  let dataDir: string;
  beforeEach(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), 'block-ledger-signing-key-'));
  });
  afterEach(async () => {
    await rm(dataDir, { recursive: true, force: true });
  });

  it('is one key for instances starting together on one data folder, never read half-written', async () => {
    const config: VerifiableLogConfig = { signingKeyFile: undefined, origin: undefined, checkpointIntervalMs: 1_000 };
    const keys = await Promise.all(Array.from({ length: 16 }, () => loadLogSigningKey(config, dataDir)));
    expect(new Set(keys.map((key) => key.keyId)).size).toBe(1);
    expect(await readdir(dataDir)).toEqual([GENERATED_KEY_FILE]);
    expect((await stat(path.join(dataDir, GENERATED_KEY_FILE))).mode & 0o777).toBe(0o600);
    const again = await loadLogSigningKey(config, dataDir);
    expect(again.keyId).toBe(keys[0].keyId);
  });
});
