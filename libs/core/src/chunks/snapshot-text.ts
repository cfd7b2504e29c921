import type { Chunk, ChunkOf, McpToolResponse } from './chunk-schemas.js';

/**
 * Rule 4: `text.delta` and `thinking.delta` carry the accumulated text of their part. Every one
 * is recorded, but as the suffix when it extends the part's previous snapshot (`{ append }`), and
 * whole only when it does not — so a long answer costs O(n) bytes in the log, not O(n²).
 * A tool call's arguments streamed in `mcp_tool_streaming` chunks (each response carrying the
 * arguments so far, as `partialArguments`) are recorded the same way: the chunk's `appendArguments`
 * holds, for each response, what its arguments added, or null where the response is stored as posted.
 * Both are top-level fields, which a posted chunk can never hold (chunks are strict), so a stored
 * chunk never means something other than what was posted. Replaying restores every snapshot exactly.
 */
export type StoredChunk = Chunk extends infer C
  ? C extends { type: SnapshotDelta; text: string }
    ? Omit<C, 'text'> & ({ text: string } | { append: string })
    : C extends { type: 'mcp_tool_streaming' }
      ? C & { appendArguments?: (string | null)[] }
      : C
  : never;

/**
 * Tool calls whose arguments are tracked at once, per message: a provider streams a handful. A call past them is
 * stored whole at each chunk, so a client opening thousands cannot make each chunk cost them all.
 */
const TRACKED_TOOL_CALLS = 32;

type SnapshotDelta = 'text.delta' | 'thinking.delta' | 'translation.delta';

/**
 * The snapshot each open part has reached; parts are independent (thinking may run inside text). `toolArguments`:
 * the arguments so far of each tool call still streaming, by its id.
 */
export interface SnapshotState {
  readonly text: string;
  readonly thinking: string;
  readonly translation: string;
  readonly toolArguments: ReadonlyMap<string, string>;
}

export const EMPTY_SNAPSHOTS: SnapshotState = { text: '', thinking: '', translation: '', toolArguments: new Map() };

const PART_OF = {
  'text.start': 'text',
  'text.delta': 'text',
  'text.complete': 'text',
  'thinking.start': 'thinking',
  'thinking.delta': 'thinking',
  'thinking.complete': 'thinking',
  'translation.delta': 'translation',
  'translation.complete': 'translation',
} as const;

const isSnapshotDelta = (type: string): type is SnapshotDelta =>
  type === 'text.delta' || type === 'thinking.delta' || type === 'translation.delta';

/**
 * `grownBy`: what a delta's text (or a single streaming tool call's arguments) added, when its maker knows (a
 * translator: `GrownDelta`, `GrownToolArguments`); a whole as long as the snapshot and that piece together is then
 * taken to extend it, without comparing the two.
 */
export function encodeChunk(
  state: SnapshotState,
  chunk: Chunk,
  grownBy?: string,
): { stored: StoredChunk; state: SnapshotState } {
  if (chunk.type === 'mcp_tool_streaming') return encodeToolArguments(state, chunk, grownBy);
  if (!isSnapshotDelta(chunk.type)) return { stored: chunk, state: advance(state, chunk) };
  const part = PART_OF[chunk.type];
  const { text, ...rest } = chunk as ChunkOf<SnapshotDelta>;
  const previous = state[part];
  const piece = addedTo(previous, text, grownBy);
  const stored = (piece === undefined ? { ...rest, text } : { ...rest, append: piece }) as StoredChunk;
  // The snapshot a fold of the stored chunk gives, whatever the maker's text.
  return { stored, state: { ...state, [part]: piece === undefined ? text : previous + piece } };
}

/** What `whole` adds to a non-empty `previous` it extends: `grownBy` when the lengths add up, else found by comparing. */
function addedTo(previous: string, whole: string, grownBy: string | undefined): string | undefined {
  if (previous === '') return undefined;
  if (grownBy !== undefined && previous.length + grownBy.length === whole.length) return grownBy;
  return whole.startsWith(previous) ? whole.slice(previous.length) : undefined;
}

export function decodeChunk(state: SnapshotState, stored: StoredChunk): { chunk: Chunk; state: SnapshotState } {
  if (stored.type === 'mcp_tool_streaming') return decodeToolArguments(state, stored);
  if (!isSnapshotDelta(stored.type)) return { chunk: stored as Chunk, state: advance(state, stored as Chunk) };
  const part = PART_OF[stored.type];
  const { append, text } = stored as StoredChunk & { append?: string; text?: string };
  const full = append === undefined ? text! : state[part] + append;
  return { chunk: withText(stored, full), state: { ...state, [part]: full } };
}

/**
 * The stored chunk with each piece it stores as an addition (`append`, `appendArguments`) in place of the whole the
 * piece grew: what is left to check of a chunk whose earlier part was checked as it grew.
 */
export function addedParts(stored: StoredChunk): Chunk {
  if (stored.type === 'mcp_tool_streaming') {
    const { appendArguments, ...chunk } = stored;
    const responses = chunk.responses.map((response, index) => {
      const piece = appendArguments?.[index] ?? null;
      return piece === null ? response : { ...response, partialArguments: piece };
    });
    return { ...chunk, responses };
  }
  const { append } = stored as StoredChunk & { append?: string };
  return append === undefined ? (stored as Chunk) : withText(stored, append);
}

/**
 * The delta with its whole text in place of its stored one, copied key by key: every delta of a
 * stream is decoded on every fold, and V8 builds `{ ...rest, text }` several times slower.
 */
function withText(stored: StoredChunk, text: string): Chunk {
  const chunk: Record<string, unknown> = {};
  for (const key in stored) if (key !== 'append' && key !== 'text') chunk[key] = stored[key as keyof StoredChunk];
  chunk.text = text;
  return chunk as Chunk;
}

/** Each response's arguments stored as what they add to its call's arguments so far, when they extend them. */
function encodeToolArguments(
  state: SnapshotState,
  chunk: ChunkOf<'mcp_tool_streaming'>,
  grownBy: string | undefined,
): { stored: StoredChunk; state: SnapshotState } {
  const tracking = new ToolArgumentsTracking(state.toolArguments);
  const appendArguments: (string | null)[] = [];
  const hint = chunk.responses.length === 1 ? grownBy : undefined;
  const responses = chunk.responses.map((response) => {
    const { partialArguments, ...rest } = response;
    const previous = partialArguments === undefined ? undefined : tracking.previous(response.id);
    const piece = previous === undefined ? undefined : addedTo(previous, partialArguments!, hint);
    // What a fold of the stored chunk gives, whatever the maker's arguments.
    if (previous !== undefined) tracking.set(response.id, piece === undefined ? partialArguments! : previous + piece);
    appendArguments.push(piece ?? null);
    return piece === undefined ? response : rest;
  });
  const stored = appendArguments.some((piece) => piece !== null) ? { ...chunk, responses, appendArguments } : chunk;
  return { stored, state: tracking.after(state) };
}

function decodeToolArguments(
  state: SnapshotState,
  { appendArguments, ...stored }: StoredChunk & { type: 'mcp_tool_streaming' },
): { chunk: Chunk; state: SnapshotState } {
  const tracking = new ToolArgumentsTracking(state.toolArguments);
  const responses = stored.responses.map((response, index) => {
    const piece = appendArguments?.[index] ?? null;
    const { partialArguments } = response;
    const previous = piece === null && partialArguments === undefined ? undefined : tracking.previous(response.id);
    if (previous === undefined) return response;
    const whole = piece === null ? partialArguments! : previous + piece;
    tracking.set(response.id, whole);
    return piece === null ? response : { ...response, partialArguments: whole };
  });
  return { chunk: { ...stored, responses }, state: tracking.after(state) };
}

/** The calls' arguments so far through one chunk, copied at its first change; encoding and decoding track alike. */
class ToolArgumentsTracking {
  private changed: Map<string, string> | undefined;

  constructor(private readonly before: ReadonlyMap<string, string>) {}

  /** The call's arguments so far (empty for a new one); `undefined` when it is not tracked and there is no room. */
  previous(id: string): string | undefined {
    const current = this.changed ?? this.before;
    if (!current.has(id) && current.size >= TRACKED_TOOL_CALLS) return undefined;
    return current.get(id) ?? '';
  }

  set(id: string, partialArguments: string): void {
    this.changed ??= new Map(this.before);
    this.changed.set(id, partialArguments);
  }

  after(state: SnapshotState): SnapshotState {
    return this.changed ? { ...state, toolArguments: this.changed } : state;
  }
}

/**
 * A part's snapshot starts empty when the part starts and is forgotten when it completes; a tool call's
 * arguments are forgotten once a chunk moves the call past streaming, or the response ends.
 */
function advance(state: SnapshotState, chunk: Chunk): SnapshotState {
  switch (chunk.type) {
    case 'mcp_tool_pending':
    case 'mcp_tool_in_progress':
    case 'mcp_tool_complete':
      return withoutToolArguments(state, chunk.responses);
    // A response's end ends its calls' streaming.
    case 'llm_response_complete':
    case 'block_complete':
    case 'error':
      return state.toolArguments.size === 0 ? state : { ...state, toolArguments: EMPTY_SNAPSHOTS.toolArguments };
    case 'text.start':
    case 'text.complete':
      return { ...state, text: '' };
    case 'thinking.start':
    case 'thinking.complete':
      return { ...state, thinking: '' };
    case 'translation.complete':
      return { ...state, translation: '' };
    default:
      return state;
  }
}

function withoutToolArguments(state: SnapshotState, responses: readonly McpToolResponse[]): SnapshotState {
  if (!responses.some((response) => state.toolArguments.has(response.id))) return state;
  const toolArguments = new Map(state.toolArguments);
  for (const response of responses) toolArguments.delete(response.id);
  return { ...state, toolArguments };
}
