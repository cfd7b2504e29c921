import { openNote, signNote, splitNote, NoteError, type NoteSigner, type NoteVerifier } from './signed-note.js';

/**
 * C2SP tlog-checkpoint (c2sp.org/tlog-checkpoint): a signed note whose text is the log's origin,
 * its tree size and its root hash (base64), one per line. The origin is the signing key's name.
 */
export interface Checkpoint {
  readonly origin: string;
  readonly treeSize: bigint;
  readonly rootHash: Buffer;
}

export function checkpointText({ origin, treeSize, rootHash }: Checkpoint): string {
  return `${origin}\n${treeSize}\n${rootHash.toString('base64')}\n`;
}

export function signCheckpoint(checkpoint: Checkpoint, signer: NoteSigner): string {
  if (checkpoint.origin !== signer.name)
    throw new NoteError('a checkpoint is signed by the key named after its origin');
  return signNote(checkpointText(checkpoint), signer);
}

/** The checkpoint in `note` once its signature by `verifier` checks and its origin is the verifier's name. */
export function openCheckpoint(note: string, verifier: NoteVerifier): Checkpoint {
  const checkpoint = checkpointOfText(openNote(note, verifier));
  if (checkpoint.origin !== verifier.name) throw new NoteError(`the checkpoint's origin is not ${verifier.name}`);
  return checkpoint;
}

/**
 * The checkpoint a note states, no signature checked: for a note kept where only its signer writes, whose key
 * is no longer at hand.
 */
export function statedCheckpoint(note: string): Checkpoint {
  return checkpointOfText(splitNote(note).text);
}

function checkpointOfText(text: string): Checkpoint {
  const [origin, size, root] = text.split('\n');
  if (!size || !/^(0|[1-9][0-9]*)$/.test(size)) throw new NoteError('the checkpoint tree size is not a decimal number');
  const rootHash = Buffer.from(root ?? '', 'base64');
  if (rootHash.length !== 32 || rootHash.toString('base64') !== root)
    throw new NoteError('the checkpoint root is not a base64 SHA-256 hash');
  return { origin, treeSize: BigInt(size), rootHash };
}
