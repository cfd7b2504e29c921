import { constants } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { mkdir, open, readdir, rename, unlink } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { NoteError, openCheckpoint, parseVerifierKey, signatureKeyIds, statedCheckpoint, type Checkpoint } from '#core';
import { LogForkError } from './log-fork-error.js';
import type { LogSigningKey } from './log-signing-key.js';

export interface RememberedCheckpoint {
  /** Where it is kept: named when it bounds what is signed. */
  readonly file: string;
  readonly checkpoint: Checkpoint;
  readonly note: string;
  /** The position of the event of the checkpoint's last leaf; none for the empty tree, or a file of an earlier version. */
  readonly lastPosition?: bigint;
}

/** A log position: a PostgreSQL bigint. */
const position = z
  .string()
  .regex(/^(0|[1-9][0-9]{0,18})$/)
  .refine((text) => BigInt(text) < 2n ** 63n, 'is past the largest log position');
const memoryFile = z.object({ note: z.string(), lastPosition: position.optional() });

/** The file's JSON, or an earlier version's bare note (a note never parses as JSON: its signature lines start with "—"). */
function parseMemory(text: string): { note: string; lastPosition?: bigint } {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { note: text };
  }
  const { note, lastPosition } = memoryFile.parse(json);
  return { note, lastPosition: lastPosition === undefined ? undefined : BigInt(lastPosition) };
}

const MEMORY_FILE = /^log-last-checkpoint-([0-9a-f]{8})$/;

/** A memory holds one note: a few hundred bytes. */
const MAX_MEMORY_BYTES = 64 * 1024;

/** Opened as a memory is: not through a symbolic link, never blocking, never as a terminal. */
const OPEN_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY;
/** A memory's new file: made by this open, not through a symbolic link. */
const WRITE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

/**
 * The text of a regular file of at most MAX_MEMORY_BYTES, or undefined when there is none. Checked before it is
 * read, and read no further than the bound: a FIFO or a device put in its place would hold the signing lock for
 * good, and a file growing, or one of /proc (which states no size), could fill the process's memory.
 */
async function readSmallFile(file: string): Promise<string | undefined> {
  const handle = await open(file, OPEN_FLAGS).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return undefined;
    if (error.code === 'ELOOP') throw new Error('it is a symbolic link');
    throw error;
  });
  if (!handle) return undefined;
  try {
    if (!(await handle.stat()).isFile()) throw new Error('it is not a regular file');
    const buffer = Buffer.alloc(MAX_MEMORY_BYTES + 1);
    let length = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length);
      length += bytesRead;
      if (bytesRead === 0 || length === buffer.length) break;
    }
    if (length > MAX_MEMORY_BYTES)
      throw new Error(`it holds more than ${MAX_MEMORY_BYTES} bytes, more than a memory does`);
    return buffer.toString('utf8', 0, length);
  } finally {
    await handle.close();
  }
}

/** The memory in `file`, or none; an error naming the file when it cannot be read or holds no checkpoint. */
async function readMemory(
  file: string,
  checkpointOf: (note: string) => Checkpoint,
): Promise<RememberedCheckpoint | undefined> {
  try {
    const text = await readSmallFile(file);
    if (text === undefined) return undefined;
    const { note, lastPosition } = parseMemory(text);
    return { file, checkpoint: checkpointOf(note), note, lastPosition };
  } catch (error) {
    // The service's own file, edited or damaged: a server error that names it, not the caller's bad request.
    throw new Error(`the signer's memory ${file} cannot be read: ${(error as Error).message}`, { cause: error });
  }
}

/** The checkpoint a rotated-out key's note states, once the note carries a signature line of that key. */
function statedBy(keyId: string): (note: string) => Checkpoint {
  return (note) => {
    if (!signatureKeyIds(note).includes(keyId)) throw new NoteError(`its note carries no signature of key ${keyId}`);
    return statedCheckpoint(note);
  };
}

/**
 * The last checkpoint this instance signed, kept in its data folder beside the key rather than in
 * the database: whoever holds the database could otherwise delete the checkpoints it signed and
 * have it sign a rewritten history. One file per key id: a new key starts with no memory of its own, and with
 * what the keys before it in the folder remember (decision 0050). With the note it keeps the position of the last
 * leaf's event, from where the signer checks the next leaves (decision 0049). A file of an earlier version holds
 * the note alone: the signer then starts from the newest checkpoint signed with its key.
 */
export class SignedCheckpointMemory {
  private readonly file: string;
  private readonly verifier;
  private known: RememberedCheckpoint | undefined;
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly dataDir: string,
    key: LogSigningKey,
  ) {
    this.file = path.join(dataDir, `log-last-checkpoint-${key.keyId}`);
    this.verifier = parseVerifierKey(key.verifierKey);
  }

  /** The memory as this process last wrote or read it: no file read. */
  get lastKnown(): RememberedCheckpoint | undefined {
    return this.known;
  }

  async recall(): Promise<RememberedCheckpoint | undefined> {
    const recalled = await readMemory(this.file, (note) => openCheckpoint(note, this.verifier));
    // A read racing a signing's write can find the note before it: what this process knows only moves on.
    if (!this.known || (recalled && recalled.checkpoint.treeSize >= this.known.checkpoint.treeSize))
      this.known = recalled;
    return recalled;
  }

  /**
   * What the keys rotated out of this data folder remember signing last: their files stay beside the new key's.
   * Their notes are taken as the folder holds them (the old keys are gone), as trusted as the folder, once each
   * carries a signature line of the key its file names. One that cannot be read stops signing (a LogForkError
   * naming it): it may be the only bound on what the database shows.
   */
  async recallRotatedOut(): Promise<RememberedCheckpoint[]> {
    const names = await readdir(this.dataDir).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return [];
      throw error;
    });
    const own = path.basename(this.file);
    const recalled = await Promise.all(
      names
        .filter((name) => name !== own)
        .flatMap((name) => {
          const keyId = MEMORY_FILE.exec(name)?.[1];
          if (!keyId) return [];
          return [
            readMemory(path.join(this.dataDir, name), statedBy(keyId)).catch((error: Error) => {
              throw new LogForkError(error.message);
            }),
          ];
        }),
    );
    return recalled.filter((memory) => memory !== undefined);
  }

  /**
   * Written before the checkpoint is stored or handed out, and replaced whole (a crash leaves the old one). One write
   * at a time in this process, and never over a larger tree this process knows: a signing overtaken by the next
   * (decision 0051) may finish after it.
   */
  remember(note: string, lastPosition: bigint | undefined): Promise<void> {
    const written = this.writing.then(() => this.write(note, lastPosition));
    this.writing = written.catch(() => undefined);
    return written;
  }

  private async write(note: string, lastPosition: bigint | undefined): Promise<void> {
    const checkpoint = statedCheckpoint(note);
    if (this.known && this.known.checkpoint.treeSize > checkpoint.treeSize) return;
    await mkdir(this.dataDir, { recursive: true });
    // A name of its own, made here and never followed through a link: the folder's holder cannot aim the write.
    const partial = `${this.file}.${process.pid}.${randomUUID()}.partial`;
    const handle = await open(partial, WRITE_FLAGS, 0o600);
    try {
      try {
        await handle.writeFile(JSON.stringify({ note, lastPosition: lastPosition?.toString() }));
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(partial, this.file);
    } catch (error) {
      await unlink(partial).catch(() => undefined);
      throw error;
    }
    this.known = { file: this.file, checkpoint, note, lastPosition };
  }
}
