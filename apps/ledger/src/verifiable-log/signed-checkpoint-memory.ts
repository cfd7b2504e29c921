import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { openCheckpoint, parseVerifierKey, type Checkpoint } from '#core';
import type { LogSigningKey } from './log-signing-key.js';

/**
 * The last checkpoint this instance signed, kept in its data folder beside the key rather than in
 * the database: whoever holds the database could otherwise delete the checkpoints it signed and
 * have it sign a rewritten history. One file per key id, so a new key starts with no memory.
 */
export class SignedCheckpointMemory {
  private readonly file: string;
  private readonly verifier;

  constructor(
    private readonly dataDir: string,
    key: LogSigningKey,
  ) {
    this.file = path.join(dataDir, `log-last-checkpoint-${key.keyId}`);
    this.verifier = parseVerifierKey(key.verifierKey);
  }

  async recall(): Promise<{ checkpoint: Checkpoint; note: string } | undefined> {
    const note = await readFile(this.file, 'utf8').catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return undefined;
      throw error;
    });
    return note === undefined ? undefined : { checkpoint: openCheckpoint(note, this.verifier), note };
  }

  /** Written before the checkpoint is stored or handed out, and replaced whole (a crash leaves the old one). */
  async remember(note: string): Promise<void> {
    await mkdir(this.dataDir, { recursive: true });
    const partial = `${this.file}.${process.pid}.partial`;
    await writeFile(partial, note, { mode: 0o600 });
    await rename(partial, this.file);
  }
}
