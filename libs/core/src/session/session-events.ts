import { sha256Hex } from '../hashing/hash-chain.js';
import { canonicalJson, jsonBytes } from '../hashing/canonical-json.js';
import {
  evolveBlocks,
  evolveGovernedTool,
  initialMessageBlocks,
  isTranslationChunk,
  openTranslation,
  userMessageBlocks,
  wholeMessageBlocks,
  type AttachmentReference,
  type GovernedToolUpdate,
  type TranslationOpening,
  type MessageBlocksState,
} from '../blocks/block-rules.js';
import type { Chunk } from '../chunks/chunk-schemas.js';
import { parseTenantStreamId, tenantStreamId } from '../tenancy/tenant-streams.js';
import { decodeChunk, EMPTY_SNAPSHOTS, type SnapshotState, type StoredChunk } from '../chunks/snapshot-text.js';
import { isDialectName, translatorOf, type DialectName } from '../dialects/dialects.js';
import { NO_TOKENS, usageAfter, type TokenUsage } from './token-usage.js';
import { appendItem, emptyList, itemAt, type GrowingList } from './growing-list.js';
import { LayeredMap } from '../layered-map.js';
import { activePath } from './branch-tree.js';

/**
 * A session's stream (`session-<id>`): its events, its state, and `evolve`. The same fold serves
 * the decider, point-in-time reads, projections and rebuilds.
 *
 * Messages form a tree (DESIGN §5): every parent, and the session for its top-level messages,
 * remembers its selected child, and the active path follows those selections from the root.
 */
export type MessageRole = 'user' | 'assistant' | 'system' | 'tool';

/** Where a fork continues from: the source session as of a log position, optionally cut to the path ending at one message. */
export interface ForkSource {
  readonly sessionId: string;
  /** Decimal log position of the source's last event the fork includes (a string: positions are 64-bit). */
  readonly position: string;
  readonly messageId: string | null;
}

/**
 * Who may write to a session: its owner (the subject of the credential that opened it) and the
 * subjects granted. Events recorded before identity existed have neither: anyone of the tenant may write.
 */
export interface SessionWriters {
  readonly owner?: string;
  readonly writers?: readonly string[];
}

export type SessionEvent =
  | {
      readonly type: 'session.opened';
      readonly data: {
        readonly sessionId: string;
        readonly title: string | null;
        readonly metadata: Readonly<Record<string, unknown>>;
      } & SessionWriters;
    }
  | {
      readonly type: 'session.forked';
      readonly data: {
        readonly sessionId: string;
        readonly title: string | null;
        readonly metadata: Readonly<Record<string, unknown>>;
        readonly source: ForkSource;
      } & SessionWriters;
    }
  | { readonly type: 'session.writers_granted'; readonly data: { readonly writers: readonly string[] } }
  | {
      readonly type: 'message.created';
      readonly data: {
        readonly messageId: string;
        readonly role: MessageRole;
        readonly parentId: string | null;
        readonly model: string | null;
        readonly content: string | null;
        /** A user message's files, by reference; absent when it has none. */
        readonly attachments?: readonly AttachmentReference[];
      };
    }
  /** `parentId: null` selects among the top-level messages. */
  | {
      readonly type: 'message.branch_selected';
      readonly data: { readonly parentId: string | null; readonly childId: string };
    }
  /** A translation block opened on an assistant message (`POST …/translations`); its content comes as translation chunks. */
  | {
      readonly type: 'message.translation_opened';
      readonly data: TranslationOpening & { readonly messageId: string };
    }
  /** The governance saga's progress on a tool call the ledger governs; it takes no producer seq. */
  | {
      readonly type: 'message.tool_call_updated';
      readonly data: GovernedToolUpdate & { readonly messageId: string; readonly toolCallId: string };
    }
  | { readonly type: `chunk.${string}`; readonly data: ChunkEventData };

export type SessionEventOf<Type extends SessionEvent['type']> = Extract<SessionEvent, { type: Type }>;

/**
 * A chunk event's data: the stored chunk (text snapshots as suffixes), its message, and for a
 * chunk translated from a producer dialect, the provider event it came from (ADR 0015).
 */
export type ChunkEventData = StoredChunk & { readonly messageId: string; readonly source?: ChunkSource };

/**
 * Where a chunk came from when no producer posted it as a Cherry chunk: a provider event
 * translated in a dialect, or what a gateway request said (a past turn, a tool's result).
 */
export type ChunkSource = DialectSource | LedgerSource;

/** The provider event behind a translated chunk; only the first chunk of each event holds the event itself. */
export interface DialectSource {
  readonly dialect: DialectName;
  /** The producer's number for the provider event, from 1 per message. */
  readonly seq: number;
  readonly event?: unknown;
}

/**
 * A chunk the ledger made and numbered: from what a gateway request's messages say (`request`), or
 * the gateway's own account of an answer it relayed (`gateway`: cut off, not fully recorded).
 */
export interface LedgerSource {
  readonly origin: 'request' | 'gateway';
}

/** A message recorded in a dialect: the translator's state after its recorded events, and their digests by seq - 1. */
export interface DialectLog {
  readonly name: DialectName;
  readonly state: unknown;
  /** A repeated seq must carry the same event. */
  readonly eventDigests: GrowingList<string>;
}

export const SESSION_STREAM_PREFIX = 'session-';
export const sessionStreamId = (tenant: string, sessionId: string) =>
  tenantStreamId(SESSION_STREAM_PREFIX, tenant, sessionId);
export const parseSessionStreamId = (streamId: string) => parseTenantStreamId(SESSION_STREAM_PREFIX, streamId);

export interface MessageState {
  readonly id: string;
  readonly role: MessageRole;
  readonly parentId: string | null;
  readonly model: string | null;
  readonly content: string | null;
  /** A user message's files, as created: a retried create must name the same ones. */
  readonly attachments: readonly AttachmentReference[];
  readonly createdAt: string;
  /** The child on the active path below this message (the newest branch unless another was selected). */
  readonly selectedChildId: string | null;
  /**
   * Digest of each recorded chunk, by seq - 1: a repeated seq must carry the same chunk. Digests,
   * not the chunks: a message's text is held once, in its blocks (a producer's large deltas would
   * otherwise stay in memory twice over).
   */
  readonly chunkDigests: GrowingList<string>;
  readonly snapshots: SnapshotState;
  /** `null` until a dialect's first provider event: Cherry chunks, or nothing yet. */
  readonly dialect: DialectLog | null;
  /** A producer posted Cherry chunks to it: no dialect may follow. */
  readonly producerChunks: boolean;
  readonly blocks: MessageBlocksState;
  /**
   * Log position of the event that last changed or moved each block, by display index: a block
   * row's position, the same whether the projection folded the events in one batch or in many.
   */
  readonly blockPositions: readonly bigint[];
  /** Tokens its model calls used, as their ends reported them (zero when none did). */
  readonly usage: TokenUsage;
  /** Log position of the last event that changed this message (its chunks or its selected child). */
  readonly position: bigint;
  /** Log position of its `message.created`: what a repeated create answers. */
  readonly createdPosition: bigint;
}

export interface OpenSession {
  readonly status: 'open';
  readonly sessionId: string;
  readonly title: string | null;
  readonly metadata: Readonly<Record<string, unknown>>;
  readonly createdAt: string;
  readonly forkedFrom: ForkSource | null;
  /** `null` for sessions opened before identity existed. */
  readonly owner: string | null;
  readonly writers: readonly string[];
  /** Messages in creation order (a fork's inherited messages first, in their source's order); versions share entries. */
  readonly messages: LayeredMap<MessageState>;
  /** The top-level message the active path starts at. */
  readonly selectedRootId: string | null;
  /**
   * The message the active path ends at (`null`: no messages yet): where a message created without a
   * parent goes, and under which a new message selects its own edge only. Known without walking the
   * path, which made each new message of a long thread cost the thread's length.
   */
  readonly activeLeafId: string | null;
  readonly position: bigint;
  /** Log position of its first event (opened or forked) and the writers it named: what a repeated open compares. */
  readonly opened: { readonly position: bigint; readonly writers: readonly string[] };
  /** What a fold of the session reads, a fork's source included: what its quota limits. `null` when folded for reading. */
  readonly stored: StoredSize | null;
  /** How many forks it stands on: 0 for an opened session, its source's plus one for a fork. */
  readonly forkDepth: number;
}

/**
 * The events a session's fold reads, and their data's size: UTF-8 bytes of each event's data as
 * JSON. Only `decide` checks the quota, so a fold for reading neither counts nor measures: it
 * keeps the session as it is for an event that changes nothing, which its readers compare by identity.
 */
export interface StoredSize {
  readonly events: number;
  readonly bytes: number;
}

export type SessionState = { readonly status: 'absent' } | OpenSession;

export const initialSessionState: SessionState = { status: 'absent' };

/** What evolve needs of a recorded event. */
export interface SessionEventEnvelope {
  readonly type: string;
  readonly data: unknown;
  readonly position: bigint;
  readonly recordedAt: string;
}

/** Whether a subject may write to the session: its owner, a granted writer, or anyone when the session predates owners. */
export function mayWrite(state: OpenSession, subject: string): boolean {
  return state.owner === null || state.owner === subject || state.writers.includes(subject);
}

/** A message's status: an assistant message's comes from its blocks; the others are whole when created. */
export const messageStatus = (message: MessageState) =>
  message.role === 'assistant' ? message.blocks.status : 'success';

/** The producer's last recorded seq: of its provider events in a dialect, else of its chunks (0: none yet). */
export const lastSeq = (message: MessageState) => message.dialect?.eventDigests.length ?? message.chunkDigests.length;

export const chunkDigest = (chunk: Chunk) => sha256Hex(canonicalJson(chunk)).slice(0, 32);

/**
 * What a fold is for. `decide` keeps a digest of every recorded chunk and provider event, which a
 * retried seq is compared with; a reader (projections, the live feed, verify) never compares, so
 * its fold hashes nothing and keeps `DIGEST_NOT_KEPT` in their place (the seqs still count).
 */
export type FoldPurpose = 'decide' | 'read';
/** Never a digest (those are 32 hex characters): `decide` refuses a state that holds it. */
export const DIGEST_NOT_KEPT = '';

/** The digest recorded at `index`, for `decide`; a programming error on a state folded for reading. */
export function keptDigest(digests: GrowingList<string>, index: number): string | undefined {
  const digest = itemAt(digests, index);
  if (digest === DIGEST_NOT_KEPT) throw new Error('a session folded for reading cannot judge a retried seq');
  return digest;
}

/**
 * Stands for the digest of a chunk translated from a provider event. No producer posts it, so no retried chunk
 * repeats it: a posted chunk at its seq is a conflict, and its content, which a long answer's deltas carry whole
 * (rule 4), is not hashed at every delta. (The few chunks a gateway request placed keep their digest.)
 */
const TRANSLATED = 'translated from a provider event';

/** What `decide` compares a retried seq with: the chunk's digest as posted; nothing when folded for reading. */
function keptChunkDigest(chunk: Chunk, source: ChunkSource | undefined, purpose: FoldPurpose): string {
  if (purpose !== 'decide') return DIGEST_NOT_KEPT;
  return source !== undefined && 'dialect' in source ? TRANSLATED : chunkDigest(postedChunk(chunk));
}

/** The chunk as its producer posted it: the decoded stored chunk without the envelope fields the log added. */
function postedChunk(decoded: Chunk): Chunk {
  const { messageId: _messageId, source: _source, ...posted } = decoded as Chunk & Partial<ChunkEventData>;
  return posted;
}

export const providerEventDigest = (event: unknown) => sha256Hex(canonicalJson(event)).slice(0, 32);

/**
 * Total and never throws: an event that does not apply leaves the state as it is. A fork's
 * `session.forked` applies through `forkSession`, which needs its source's state; here it does not apply.
 */
export function evolveSession(
  state: SessionState,
  event: SessionEventEnvelope,
  purpose: FoldPurpose = 'decide',
): SessionState {
  return evolveOne(state, event, purpose, false);
}

/** `inPlace`: the state's map of messages is the caller's own, seen by no one else, and may be changed. */
function evolveOne(
  state: SessionState,
  event: SessionEventEnvelope,
  purpose: FoldPurpose,
  inPlace: boolean,
): SessionState {
  const next = applySessionEvent(state, event, purpose, inPlace);
  // Every event of an open session's stream counts, one that changes nothing too: a fold reads it.
  return next.status === 'open' ? withStored(next, [event]) : next;
}

function applySessionEvent(
  state: SessionState,
  event: SessionEventEnvelope,
  purpose: FoldPurpose,
  inPlace: boolean,
): SessionState {
  if (event.type === 'session.opened') {
    if (state.status !== 'absent') return state;
    const data = event.data as SessionEventOf<'session.opened'>['data'];
    return {
      status: 'open',
      sessionId: data.sessionId,
      title: data.title,
      metadata: data.metadata,
      createdAt: event.recordedAt,
      forkedFrom: null,
      owner: data.owner ?? null,
      writers: data.writers ?? [],
      messages: LayeredMap.empty(),
      selectedRootId: null,
      activeLeafId: null,
      position: event.position,
      opened: { position: event.position, writers: data.writers ?? [] },
      stored: purpose === 'decide' ? { events: 0, bytes: 0 } : null,
      forkDepth: 0,
    };
  }
  if (state.status !== 'open') return state;
  if (event.type === 'session.writers_granted') {
    const { writers } = event.data as SessionEventOf<'session.writers_granted'>['data'];
    return { ...state, writers: [...new Set([...state.writers, ...writers])], position: event.position };
  }
  if (event.type === 'message.created') {
    const data = event.data as SessionEventOf<'message.created'>['data'];
    if (state.messages.has(data.messageId) || (data.parentId !== null && !state.messages.has(data.parentId)))
      return state;
    // An assistant message created with its whole content is complete from the start ('' is no content).
    const blocks =
      data.role === 'assistant' && data.content !== null && data.content !== ''
        ? wholeMessageBlocks(data.messageId, data.content, event.recordedAt)
        : data.role === 'user' && data.attachments
          ? userMessageBlocks(data.messageId, data.content, data.attachments, event.recordedAt)
          : initialMessageBlocks(data.messageId);
    const message: MessageState = {
      id: data.messageId,
      role: data.role,
      parentId: data.parentId,
      model: data.model,
      content: data.content,
      attachments: data.attachments ?? [],
      createdAt: event.recordedAt,
      selectedChildId: null,
      chunkDigests: emptyList(),
      snapshots: EMPTY_SNAPSHOTS,
      dialect: null,
      producerChunks: false,
      blocks,
      blockPositions: blocks.blocks.map(() => event.position),
      usage: NO_TOKENS,
      position: event.position,
      createdPosition: event.position,
    };
    // A new message is a new branch and becomes the selected one, all the way up: it is on the active path.
    // The map is this call's own from here on (a copy, or the caller's own): the path is selected in it.
    const messages = writableMessages(state, inPlace);
    const added = {
      ...state,
      messages: messages.set(message.id, message),
      activeLeafId: message.id,
      position: event.position,
    };
    return data.parentId !== null && data.parentId === state.activeLeafId
      ? select(added, data.parentId, message.id, event.position, true)
      : selectPathTo(added, message.id, event.position);
  }
  if (event.type === 'message.branch_selected') {
    const { parentId, childId } = event.data as SessionEventOf<'message.branch_selected'>['data'];
    const child = state.messages.get(childId);
    if (!child || child.parentId !== parentId) return state;
    const selected = select(state, parentId, childId, event.position, inPlace);
    // A selection is rare and may move the path anywhere below it: the leaf is found by walking it.
    const activeLeafId = activePath(selected.selectedRootId, selected.messages).at(-1)?.id ?? null;
    return { ...selected, activeLeafId, position: event.position };
  }
  if (event.type === 'message.translation_opened') {
    const { messageId, ...opening } = event.data as SessionEventOf<'message.translation_opened'>['data'];
    return changeBlocks(state, messageId, event, inPlace, (blocks) =>
      openTranslation(blocks, opening, event.recordedAt),
    );
  }
  if (event.type === 'message.tool_call_updated') {
    const { messageId, ...update } = event.data as SessionEventOf<'message.tool_call_updated'>['data'];
    const show = (blocks: MessageBlocksState) => evolveGovernedTool(blocks, update, event.recordedAt);
    return changeBlocks(state, messageId, event, inPlace, show);
  }
  const chunkOf = chunkMessageId(event);
  if (chunkOf !== undefined) {
    const message = state.messages.get(chunkOf);
    return message ? withMessage(state, evolveChunk(message, event, purpose), inPlace) : state;
  }
  return state;
}

/**
 * `evolveSession` over events in order. A run of chunk events of one message changes only that
 * message: the run is folded on the message alone and set into the session once, without the
 * session states in between, which nothing sees.
 */
export function evolveSessionEvents(
  state: SessionState,
  events: readonly SessionEventEnvelope[],
  purpose: FoldPurpose = 'decide',
): SessionState {
  let folded = state;
  for (let index = 0; index < events.length;) {
    const messageId = chunkMessageId(events[index]);
    const message = messageId === undefined || folded.status !== 'open' ? undefined : folded.messages.get(messageId);
    // A map this call made is seen by no one else yet: each event sets its messages in it in place,
    // where copying it for each would make a fold cost its events times its messages. Here a map is
    // either the input's or one made in this loop: a fork, whose map may be its source's, is applied
    // outside (`forkSession`, through `foldSessionEvents`), never in here.
    const owned = folded.status === 'open' && (state.status !== 'open' || folded.messages !== state.messages);
    if (!message) {
      folded = evolveOne(folded, events[index], purpose, owned);
      index += 1;
      continue;
    }
    let next = message;
    const runStart = index;
    for (; index < events.length && chunkMessageId(events[index]) === messageId; index += 1)
      next = evolveChunk(next, events[index], purpose);
    folded = withStored(withMessage(folded as OpenSession, next, owned), events.slice(runStart, index));
  }
  return folded;
}

/** The session having read these events more: counted and measured, unless folded for reading. */
function withStored(state: OpenSession, events: readonly SessionEventEnvelope[]): OpenSession {
  const { stored } = state;
  if (stored === null) return state;
  let bytes = stored.bytes;
  for (const event of events) bytes += jsonBytes(event.data);
  return { ...state, stored: { events: stored.events + events.length, bytes } };
}

/** The message a chunk event goes to; `undefined` for any other event. */
const chunkMessageId = (event: SessionEventEnvelope): string | undefined =>
  event.type.startsWith('chunk.') ? (event.data as ChunkEventData).messageId : undefined;

/** The session with one message changed, as of that message's position; the same session if it did not change. */
function withMessage(state: OpenSession, message: MessageState, inPlace: boolean): OpenSession {
  const previous = state.messages.get(message.id);
  if (previous === message) return state;
  const messages = writableMessages(state, inPlace);
  return { ...state, messages: messages.set(message.id, message), position: message.position };
}

/** One chunk event on its message; the message as it is when the chunk is not its next seq. */
function evolveChunk(message: MessageState, event: SessionEventEnvelope, purpose: FoldPurpose): MessageState {
  // The event's data is the stored chunk, kept and decoded as it is: no rule reads its messageId or source.
  const stored = event.data as ChunkEventData;
  const source = stored.source;
  if (stored.seq !== message.chunkDigests.length + 1) return message;
  const { chunk, state: snapshots } = decodeChunk(message.snapshots, stored);
  const blocks = evolveBlocks(message.blocks, { chunk, recordedAt: event.recordedAt });
  // Field by field, not `{ ...message }`: this runs for every chunk of every fold, and V8 copies a
  // spread of these objects on its slow path.
  return {
    id: message.id,
    role: message.role,
    parentId: message.parentId,
    model: message.model,
    content: message.content,
    attachments: message.attachments,
    createdAt: message.createdAt,
    selectedChildId: message.selectedChildId,
    chunkDigests: appendItem(message.chunkDigests, keptChunkDigest(chunk, source, purpose)),
    snapshots,
    dialect:
      source !== undefined && 'event' in source ? advanceDialect(message.dialect, source, purpose) : message.dialect,
    producerChunks: message.producerChunks || (source === undefined && !isTranslationChunk(chunk)),
    blocks,
    blockPositions: blockPositionsAfter(message, blocks, event.position),
    // A finalized message's later chunks change nothing, its usage included.
    usage: message.blocks.finalized
      ? message.usage
      : usageAfter(message.usage, chunk, source !== undefined && 'dialect' in source),
    position: event.position,
    createdPosition: message.createdPosition,
  };
}

/** An event that changes one message's blocks, not through a chunk; a message the session does not hold changes nothing. */
function changeBlocks(
  state: OpenSession,
  messageId: string,
  event: SessionEventEnvelope,
  inPlace: boolean,
  change: (blocks: MessageBlocksState) => MessageBlocksState,
): SessionState {
  const message = state.messages.get(messageId);
  if (!message) return state;
  const blocks = change(message.blocks);
  const blockPositions = blockPositionsAfter(message, blocks, event.position);
  return withMessage(state, { ...message, blocks, blockPositions, position: event.position }, inPlace);
}

/** Each block that is new, changed or moved in `blocks` is stamped with `position`. */
function blockPositionsAfter(message: MessageState, blocks: MessageBlocksState, position: bigint): readonly bigint[] {
  if (blocks === message.blocks) return message.blockPositions;
  const before = message.blocks.blocks;
  return blocks.blocks.map((block, index) => (before[index] === block ? message.blockPositions[index] : position));
}

/**
 * A fork's state from its first event and its source's state as of the recorded position: the
 * source's tree (cut to the path ending at `messageId` when one is given) under the fork's own
 * id, title and metadata. The messages are the source's, shared, not copied event by event.
 */
export function forkSession(source: SessionState, event: SessionEventEnvelope): SessionState {
  const data = event.data as SessionEventOf<'session.forked'>['data'];
  if (source.status !== 'open') return initialSessionState;
  const fork = withStored(
    {
      ...source,
      sessionId: data.sessionId,
      title: data.title,
      metadata: data.metadata,
      createdAt: event.recordedAt,
      forkedFrom: data.source,
      owner: data.owner ?? null,
      writers: data.writers ?? [],
      position: event.position,
      opened: { position: event.position, writers: data.writers ?? [] },
      forkDepth: source.forkDepth + 1,
    },
    [event],
  );
  const cutAt = data.source.messageId;
  if (cutAt === null) return fork;
  const kept = new Set(ancestry(source.messages, cutAt).map((message) => message.id));
  const messages = LayeredMap.from([...source.messages].filter(([id]) => kept.has(id)));
  const leaf = messages.get(cutAt);
  if (leaf) messages.set(cutAt, { ...leaf, selectedChildId: null });
  return selectPathTo({ ...fork, messages, activeLeafId: leaf ? cutAt : null }, cutAt, event.position);
}

/** The message and its ancestors, root first. */
export function ancestry<Message extends { readonly id: string; readonly parentId: string | null }>(
  messages: ReadonlyMap<string, Message>,
  messageId: string,
): Message[] {
  const path: Message[] = [];
  for (
    let message = messages.get(messageId);
    message;
    message = message.parentId === null ? undefined : messages.get(message.parentId)
  )
    path.push(message);
  // Collected leaf first: reversed once, where unshifting each would make a deep thread quadratic.
  return path.reverse();
}

/** The messages of `state` to change: its own map when `inPlace` (see `evolveOne`), else a new version of it. */
function writableMessages(state: OpenSession, inPlace: boolean): LayeredMap<MessageState> {
  return inPlace ? state.messages : state.messages.writable();
}

/** Selects the path to `messageId` in the state's map, which must be the caller's own: a new message's, a fork's. */
function selectPathTo(state: OpenSession, messageId: string, position: bigint): OpenSession {
  return ancestry(state.messages, messageId).reduce(
    (current, message) => select(current, message.parentId, message.id, position, true),
    state,
  );
}

function select(
  state: OpenSession,
  parentId: string | null,
  childId: string,
  position: bigint,
  inPlace: boolean,
): OpenSession {
  if (parentId === null) return state.selectedRootId === childId ? state : { ...state, selectedRootId: childId };
  const parent = state.messages.get(parentId)!;
  if (parent.selectedChildId === childId) return state;
  const messages = writableMessages(state, inPlace);
  return { ...state, messages: messages.set(parentId, { ...parent, selectedChildId: childId, position }) };
}

/** The translator folds the recorded provider event again: its state is never stored, only rebuilt. */
function advanceDialect(log: DialectLog | null, source: DialectSource, purpose: FoldPurpose): DialectLog | null {
  if (!isDialectName(source.dialect) || (log !== null && log.name !== source.dialect)) return log;
  const translator = translatorOf(source.dialect);
  const current = log ?? { name: source.dialect, state: translator.initial, eventDigests: emptyList() };
  if (source.seq !== current.eventDigests.length + 1) return log;
  let state = current.state;
  try {
    state = translator.translate(current.state, source.event).state;
  } catch {
    // Unreachable for events the decider accepted; evolve stays total either way.
  }
  const digest = purpose === 'decide' ? providerEventDigest(source.event) : DIGEST_NOT_KEPT;
  return { ...current, state, eventDigests: appendItem(current.eventDigests, digest) };
}
