import { createHash, createPublicKey, generateKeyPairSync, randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { link, mkdir, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ed25519PrivateKey, verifierKeyOf, type NoteSigner } from '#core';
import { ConfigFileError, readConfigFile } from '../config/config-file.js';
import type { VerifiableLogConfig } from '../config/ledger-config.js';

export const GENERATED_KEY_FILE = 'log-signing-key.pem';

export interface LogSigningKey {
  readonly signer: NoteSigner;
  /** The verifier key (C2SP vkey) auditors pin. */
  readonly verifierKey: string;
  readonly keyId: string;
}

/**
 * The checkpoint signing key: `LEDGER_SIGNING_KEY`, or the one generated into the data folder on
 * the first start (mode 0600, never overwritten; with `generate: false`, as a repair loads it, none
 * is made). Instances sharing a database must share the key file: each signs with its own key
 * otherwise, and auditors pin one.
 */
export async function loadLogSigningKey(
  config: VerifiableLogConfig,
  dataDir: string,
  { generate = true } = {},
): Promise<LogSigningKey> {
  const file = config.signingKeyFile ?? path.join(dataDir, GENERATED_KEY_FILE);
  // A generated key is the data folder's: a problem with it is named by LEDGER_DATA_DIR.
  const variable = config.signingKeyFile ? 'LEDGER_SIGNING_KEY' : 'LEDGER_DATA_DIR';
  if (!config.signingKeyFile && generate) await generateKeyUnlessPresent(file, dataDir);
  const pem = readConfigFile(variable, file);
  let privateKey;
  try {
    privateKey = ed25519PrivateKey(pem);
  } catch {
    throw new ConfigFileError(variable, file, 'not an Ed25519 private key in PKCS #8 PEM');
  }
  const fingerprint = createHash('sha256')
    .update(createPublicKey(privateKey).export({ format: 'der', type: 'spki' }))
    .digest('hex');
  const signer = { name: config.origin ?? `block-ledger/${fingerprint.slice(0, 16)}`, privateKey };
  const verifierKey = verifierKeyOf(signer);
  return { signer, verifierKey, keyId: verifierKey.split('+')[1] };
}

async function generateKeyUnlessPresent(file: string, dataDir: string): Promise<void> {
  if (existsSync(file)) return;
  await mkdir(dataDir, { recursive: true });
  const generated = generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
  // Written whole under a name of its own, then linked into place: two instances starting together on
  // one data folder keep whichever key was linked first, and neither ever reads a half-written file.
  const draft = `${file}.${randomUUID()}.tmp`;
  await writeFile(draft, generated, { mode: 0o600, flag: 'wx' });
  try {
    await link(draft, file).catch((exists: NodeJS.ErrnoException) => {
      if (exists.code !== 'EEXIST') throw exists;
    });
  } finally {
    await unlink(draft);
  }
}
