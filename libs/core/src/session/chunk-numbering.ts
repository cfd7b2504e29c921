import { ChunkValidationError, parseChunk, type Chunk } from '../chunks/chunk-schemas.js';
import { addedParts, encodeChunk, type SnapshotState } from '../chunks/snapshot-text.js';
import type { GrownDelta, GrownToolArguments, TranslatedChunk, UnnumberedChunk } from '../dialects/dialect.js';
import { nameUuid } from '../hashing/name-uuid.js';
import type { ChunkEventData, ChunkSource, MessageState, SessionEvent } from './session-events.js';
import { SessionError } from './session-error.js';

/** An event to append, with its deterministic id (so a retried command is recorded once). */
export interface DecidedEvent {
  readonly id: string;
  readonly event: SessionEvent;
}

/** Where the ledger numbers a message's next chunk from: its last seq and its parts' text snapshots. */
export interface ChunkCursor {
  readonly messageId: string;
  readonly seq: number;
  readonly snapshots: SnapshotState;
}

export const chunkCursor = (message: MessageState): ChunkCursor => ({
  messageId: message.id,
  seq: message.chunkDigests.length,
  snapshots: message.snapshots,
});

/**
 * A chunk the ledger numbers itself, checked like a posted one as the log will store it: a delta that extends its
 * part's snapshot is checked for the text it adds (the snapshot was checked as it grew), so each delta of a long
 * answer costs what it adds. `index` names the input it came from when it is not storable.
 */
export function numberChunk(cursor: ChunkCursor, translated: TranslatedChunk, source: ChunkSource, index: number) {
  const seq = cursor.seq + 1;
  const { grownBy, ...unnumbered } = translated as
    GrownDelta | GrownToolArguments | (UnnumberedChunk & { grownBy?: undefined });
  const encoded = encodeChunk(cursor.snapshots, { seq, ...unnumbered } as Chunk, grownBy);
  validChunk(addedParts(encoded.stored), index);
  const data = { messageId: cursor.messageId, ...encoded.stored, source } as ChunkEventData;
  const event: DecidedEvent = {
    id: nameUuid(`chunk:${cursor.messageId}:${seq}`),
    event: { type: `chunk.${unnumbered.type}`, data },
  };
  return { cursor: { ...cursor, seq, snapshots: encoded.state }, event };
}

/** What a translator made, checked like a posted chunk (parsed tool arguments may hold what the log cannot store). */
function validChunk(value: Record<string, unknown>, index: number): void {
  try {
    parseChunk(value, index);
  } catch (error) {
    if (!(error instanceof ChunkValidationError)) throw error;
    throw invalidEvent(index, '', `translates to a ${String(value.type)} chunk whose ${error.field} ${error.rule}`);
  }
}

export function invalidEvent(index: number, field: string, message: string): SessionError {
  const where = field === '' ? `events[${index}]` : `events[${index}].${field}`;
  return new SessionError('invalid_event', `${where}: ${message}`, where);
}
