import type { Chunk } from '../chunks/chunk-schemas.js';
import { encodeChunk } from '../chunks/snapshot-text.js';
import { findUnstorableJson } from '../chunks/storable-json.js';
import { DialectError, fieldPath, type UnnumberedChunk } from '../dialects/dialect.js';
import { placeModelCall, type ModelCallCommand } from '../gateway/model-call-placement.js';
import { chunkCursor, invalidEvent, numberChunk, type DecidedEvent } from './chunk-numbering.js';
import { SessionError } from './session-error.js';
import { translatorOf, type DialectName } from '../dialects/dialects.js';
import { nameUuid } from '../hashing/name-uuid.js';
import { canonicalJson } from '../hashing/canonical-json.js';
import {
  atBlockLimit,
  evolveBlocks,
  ignoredReason,
  isTranslationChunk,
  MAX_MESSAGE_BLOCKS,
  type AttachmentReference,
  type IgnoredReason,
  type TranslationOpening,
} from '../blocks/block-rules.js';
import {
  chunkDigest,
  keptDigest,
  providerEventDigest,
  type ChunkEventData,
  type ChunkSource,
  type ForkSource,
  type MessageRole,
  type MessageState,
  type SessionEventOf,
  type SessionState,
} from './session-events.js';

/**
 * The session's commands and `decide`: checks the rules against the folded state and returns the
 * events to append, or throws a typed domain error. Ids and time come in as data.
 */
export type SessionCommand =
  | {
      readonly type: 'open_session';
      readonly sessionId: string;
      readonly title: string | null;
      readonly metadata: Readonly<Record<string, unknown>>;
      /** The subject of the credential that opens it, and the subjects it lets write too. */
      readonly owner: string;
      readonly writers: readonly string[];
    }
  /** Lets more subjects write to the session (its owner or an admin decides; the caller checks who asks). */
  | { readonly type: 'grant_writers'; readonly writers: readonly string[]; readonly eventId: string }
  | {
      readonly type: 'create_message';
      readonly messageId: string;
      readonly role: MessageRole;
      /** `undefined`: child of the active path's leaf; `null`: a new top-level message. */
      readonly parentId: string | null | undefined;
      readonly model: string | null;
      readonly content: string | null;
      /** A user message's files by reference (checked at the edge): its file and image blocks. */
      readonly attachments?: readonly AttachmentReference[];
    }
  /** Opens a translation block on an assistant message; the id comes with the command, as a retry may not reuse it. */
  | ({ readonly type: 'open_translation'; readonly messageId: string; readonly eventId: string } & TranslationOpening)
  /** `parentId: null` selects among the top-level messages. */
  | {
      readonly type: 'select_branch';
      readonly parentId: string | null;
      readonly childId: string;
      readonly eventId: string;
    }
  | {
      readonly type: 'fork_session';
      readonly sessionId: string;
      /** `null`: the source's. */
      readonly title: string | null;
      readonly metadata: Readonly<Record<string, unknown>> | null;
      readonly sourceSessionId: string;
      /** The source folded as of the fork position (its `position` is the last source event the fork includes). */
      readonly source: SessionState;
      /** Cut the fork to the path ending at this message. */
      readonly messageId: string | null;
      readonly owner: string;
      readonly writers: readonly string[];
    }
  | { readonly type: 'append_chunks'; readonly messageId: string; readonly chunks: readonly Chunk[] }
  /**
   * Provider events in a producer dialect, numbered by the producer from `firstSeq` on (1 per
   * message); each is translated into Cherry chunks, which the ledger numbers itself (ADR 0015).
   */
  | {
      readonly type: 'append_dialect_events';
      readonly messageId: string;
      readonly dialect: DialectName;
      readonly firstSeq: number;
      readonly events: readonly unknown[];
    }
  /** A model call through the gateway, placed in the tree from the conversation it sends (DESIGN §12). */
  | ({ readonly type: 'record_model_call' } & ModelCallCommand)
  /** The gateway's account of how an answer it relayed ended badly: the client left (the message pauses) or the record has a gap. */
  | {
      readonly type: 'record_answer_failure';
      readonly messageId: string;
      readonly error: { readonly name: string; readonly message: string };
    }
  /** From the governance saga: one id per step of the call, so a retried step is recorded once. */
  | ({
      readonly type: 'update_tool_call';
      readonly eventId: string;
    } & SessionEventOf<'message.tool_call_updated'>['data']);

export type { DecidedEvent } from './chunk-numbering.js';
export { SessionError } from './session-error.js';

export interface Decision {
  readonly events: readonly DecidedEvent[];
  /** append_chunks, append_dialect_events: the seqs already recorded with the same content. */
  readonly duplicateSeqs: readonly number[];
  /** create_message: the parent the message got. */
  readonly parentId?: string | null;
  /** append_chunks: the new chunks recorded that change nothing, and why. */
  readonly ignored?: readonly IgnoredChunk[];
  /** open_session, create_message, fork_session: the same create again, answered with the original's position. */
  readonly repeatOf?: { readonly position: bigint };
  /** fork_session: the source the fork stands on (a repeat's too). */
  readonly forkedFrom?: ForkSource;
  /** open_translation: the seq the translation's first chunk takes. */
  readonly nextSeq?: number;
  /** record_model_call: the message the answer goes to, and the provider seq of its first event. */
  readonly answer?: { readonly messageId: string; readonly nextEventSeq: number };
}

export interface IgnoredChunk {
  readonly seq: number;
  readonly reason: IgnoredReason;
}

export function decideSession(command: SessionCommand, state: SessionState): Decision {
  switch (command.type) {
    case 'open_session': {
      if (state.status === 'open') {
        // A retry of the same open is answered as the first was; any other is a conflict naming what differs.
        const differing = firstDifference([
          ['title', state.title, command.title],
          ['metadata', state.metadata, command.metadata],
          ['writers', state.opened.writers, command.writers],
        ]);
        if (differing !== undefined || state.forkedFrom !== null)
          return sessionExists(command.sessionId, differing ?? 'id', state.forkedFrom !== null);
        return { events: [], duplicateSeqs: [], repeatOf: { position: state.opened.position } };
      }
      return {
        events: [
          {
            id: nameUuid(`session:${command.sessionId}`),
            event: {
              type: 'session.opened',
              data: {
                sessionId: command.sessionId,
                title: command.title,
                metadata: command.metadata,
                owner: command.owner,
                writers: command.writers,
              },
            },
          },
        ],
        duplicateSeqs: [],
      };
    }
    case 'grant_writers': {
      if (state.status !== 'open') throw new SessionError('session_not_found', 'no such session');
      const writers = command.writers.filter((writer) => writer !== state.owner && !state.writers.includes(writer));
      if (writers.length === 0) return { events: [], duplicateSeqs: [] };
      return {
        events: [{ id: command.eventId, event: { type: 'session.writers_granted', data: { writers } } }],
        duplicateSeqs: [],
      };
    }
    case 'create_message': {
      if (state.status !== 'open') throw new SessionError('session_not_found', 'no such session');
      const existing = state.messages.get(command.messageId);
      if (existing) {
        // Omitted, the parent was the active leaf at the first create: a retry cannot name it, so it matches any.
        const differing = firstDifference([
          ['role', existing.role, command.role],
          ['content', existing.content, command.content],
          ['parentId', existing.parentId, command.parentId === undefined ? existing.parentId : command.parentId],
          ['model', existing.model, command.model],
          ['attachments', existing.attachments, command.attachments ?? []],
        ]);
        if (differing !== undefined) {
          const rule = `message ${command.messageId} already exists with a different ${differing}`;
          throw new SessionError('message_exists', rule, differing);
        }
        return {
          events: [],
          duplicateSeqs: [],
          parentId: existing.parentId,
          repeatOf: { position: existing.createdPosition },
        };
      }
      const parentId = command.parentId === undefined ? state.activeLeafId : command.parentId;
      if (parentId !== null && !state.messages.has(parentId))
        throw new SessionError('parent_not_found', `parent message ${parentId} is not in this session`, 'parentId');
      if (command.attachments?.length && command.role !== 'user')
        throw new SessionError('invalid_message', 'attachments: only a user message attaches files', 'attachments');
      const data = {
        messageId: command.messageId,
        role: command.role,
        parentId,
        model: command.model,
        content: command.content,
        ...(command.attachments?.length ? { attachments: command.attachments } : {}),
      };
      return {
        events: [{ id: nameUuid(`message:${command.messageId}`), event: { type: 'message.created', data } }],
        duplicateSeqs: [],
        parentId,
      };
    }
    case 'select_branch': {
      if (state.status !== 'open') throw new SessionError('session_not_found', 'no such session');
      const { parentId, childId } = command;
      if (parentId !== null && !state.messages.has(parentId))
        throw new SessionError('message_not_found', `message ${parentId} is not in this session`);
      if (state.messages.get(childId)?.parentId !== parentId) {
        throw new SessionError(
          'not_a_child',
          `message ${childId} is not ${parentId === null ? 'a top-level message' : `a child of ${parentId}`}`,
          'childId',
        );
      }
      const selected = parentId === null ? state.selectedRootId : state.messages.get(parentId)!.selectedChildId;
      if (selected === childId) return { events: [], duplicateSeqs: [] };
      // Selections may go back and forth, so the id comes with the command; a retry that finds its child selected records nothing.
      return {
        events: [{ id: command.eventId, event: { type: 'message.branch_selected', data: { parentId, childId } } }],
        duplicateSeqs: [],
      };
    }
    case 'fork_session': {
      const { source, messageId } = command;
      if (state.status === 'open' && (state.forkedFrom === null || source.status !== 'open'))
        throw new SessionError('session_exists', `session ${command.sessionId} already exists`, 'id');
      if (source.status !== 'open')
        throw new SessionError('source_not_found', `session ${command.sourceSessionId} did not exist at that position`);
      if (messageId !== null && !source.messages.has(messageId))
        throw new SessionError(
          'message_not_found',
          `message ${messageId} is not in session ${command.sourceSessionId} at that position`,
          'messageId',
        );
      const data = {
        sessionId: command.sessionId,
        title: command.title ?? source.title,
        metadata: command.metadata ?? source.metadata,
        source: { sessionId: command.sourceSessionId, position: source.position.toString(), messageId },
        owner: command.owner,
        writers: command.writers,
      };
      if (state.status === 'open') {
        // A retry of the same fork (the same source, position and cut, title, metadata and writers) is answered as
        // the first was; any other is a conflict naming what differs.
        const differing = firstDifference([
          ['sourceSessionId', state.forkedFrom?.sessionId, data.source.sessionId],
          ['atPosition', state.forkedFrom?.position, data.source.position],
          ['messageId', state.forkedFrom?.messageId, data.source.messageId],
          ['title', state.title, data.title],
          ['metadata', state.metadata, data.metadata],
          ['writers', state.opened.writers, data.writers],
        ]);
        if (differing !== undefined)
          throw new SessionError(
            'session_exists',
            `session ${command.sessionId} already exists as a fork with a different ${differing}`,
            differing,
          );
        return {
          events: [],
          duplicateSeqs: [],
          repeatOf: { position: state.opened.position },
          forkedFrom: data.source,
        };
      }
      return {
        events: [{ id: nameUuid(`session:${command.sessionId}`), event: { type: 'session.forked', data } }],
        duplicateSeqs: [],
        forkedFrom: data.source,
      };
    }
    case 'append_chunks': {
      const message = assistantMessage(state, command.messageId);
      // A message recorded in a dialect still takes its translations as Cherry chunks.
      if (message.dialect && !command.chunks.every(isTranslationChunk)) {
        const { name } = message.dialect;
        const rule = `message ${message.id} is recorded in the ${name} dialect; send its events with ?dialect=${name}`;
        throw new SessionError('dialect_conflict', rule, 'dialect');
      }
      const events: DecidedEvent[] = [];
      const duplicateSeqs: number[] = [];
      let snapshots = message.snapshots;
      let recorded = message.chunkDigests.length;
      let blocks = message.blocks;
      const ignored: IgnoredChunk[] = [];
      command.chunks.forEach((chunk, index) => {
        if (chunk.seq <= recorded) {
          const known =
            chunk.seq <= message.chunkDigests.length
              ? keptDigest(message.chunkDigests, chunk.seq - 1)
              : chunkDigest(command.chunks.find((earlier) => earlier.seq === chunk.seq)!);
          if (known !== chunkDigest(chunk))
            throw new SessionError(
              'seq_conflict',
              `chunks[${index}]: seq ${chunk.seq} is already recorded with different content`,
              `chunks[${index}].seq`,
            );
          duplicateSeqs.push(chunk.seq);
          return;
        }
        if (chunk.seq !== recorded + 1)
          throw new SessionError(
            'seq_gap',
            `chunks[${index}]: expected seq ${recorded + 1}, got ${chunk.seq}`,
            `chunks[${index}].seq`,
          );
        const encoded = encodeChunk(snapshots, chunk);
        snapshots = encoded.state;
        recorded += 1;
        const reason = ignoredReason(blocks, chunk);
        if (reason) ignored.push({ seq: chunk.seq, reason });
        // Only which parts are open matters here, not when: the recorded time comes from the log.
        else blocks = evolveBlocks(blocks, { chunk, recordedAt: '' });
        events.push({
          id: nameUuid(`chunk:${command.messageId}:${chunk.seq}`),
          event: {
            type: `chunk.${chunk.type}`,
            data: { messageId: command.messageId, ...encoded.stored } as ChunkEventData,
          },
        });
      });
      return { events, duplicateSeqs, ignored };
    }
    case 'open_translation': {
      const { messageId, blockId, targetLanguage, sourceLanguage, sourceBlockId: source } = command;
      const message = assistantMessage(state, messageId, 'translations');
      if (atBlockLimit(message.blocks))
        throw new SessionError(
          'message_full',
          `message ${messageId} holds ${MAX_MESSAGE_BLOCKS} blocks, the most a message may hold`,
          'mid',
        );
      const sourceBlock = source === undefined ? undefined : message.blocks.blocks.find((block) => block.id === source);
      if (source !== undefined && (!sourceBlock || sourceBlock.type === 'translation'))
        throw new SessionError(
          'block_not_found',
          `sourceBlockId: ${source} is not a block of message ${messageId} that can be translated`,
          'sourceBlockId',
        );
      const data = {
        messageId,
        blockId,
        targetLanguage,
        ...(sourceLanguage === undefined ? {} : { sourceLanguage }),
        ...(source === undefined ? {} : { sourceBlockId: source }),
      };
      return {
        events: [{ id: command.eventId, event: { type: 'message.translation_opened', data } }],
        duplicateSeqs: [],
        nextSeq: message.chunkDigests.length + 1,
      };
    }
    case 'append_dialect_events':
      return decideDialectEvents(command, assistantMessage(state, command.messageId));
    case 'record_answer_failure': {
      const message = assistantMessage(state, command.messageId);
      const { event } = numberChunk(
        chunkCursor(message),
        { type: 'error', error: command.error },
        { origin: 'gateway' },
        0,
      );
      return { events: [event], duplicateSeqs: [] };
    }
    case 'record_model_call': {
      if (state.status !== 'open') throw new SessionError('session_not_found', 'no such session');
      return { ...placeModelCall(command, state), duplicateSeqs: [] };
    }
    case 'update_tool_call': {
      if (state.status !== 'open') throw new SessionError('session_not_found', 'no such session');
      const { eventId, ...update } = command;
      const data = {
        messageId: update.messageId,
        toolCallId: update.toolCallId,
        response: update.response,
        governance: update.governance,
      };
      if (!state.messages.has(data.messageId))
        throw new SessionError('message_not_found', `message ${data.messageId} is not in this session`);
      return { events: [{ id: eventId, event: { type: 'message.tool_call_updated', data } }], duplicateSeqs: [] };
    }
  }
}

/** The first field whose wanted value differs from the recorded one (JSON values compared canonically). */
function firstDifference(fields: readonly (readonly [string, unknown, unknown])[]): string | undefined {
  return fields.find(([, recorded, wanted]) => canonicalJson(recorded) !== canonicalJson(wanted ?? null))?.[0];
}

function sessionExists(sessionId: string, field: string, forked: boolean): never {
  const rule = forked
    ? `session ${sessionId} already exists as a fork`
    : `session ${sessionId} already exists with a different ${field}`;
  throw new SessionError('session_exists', rule, forked ? 'id' : field);
}

function assistantMessage(state: SessionState, messageId: string, what = 'chunks'): MessageState {
  if (state.status !== 'open') throw new SessionError('session_not_found', 'no such session');
  const message = state.messages.get(messageId);
  if (!message) throw new SessionError('message_not_found', `message ${messageId} is not in this session`);
  if (message.role !== 'assistant') {
    const rule = `${what} belong to assistant messages; ${messageId} is a ${message.role} message`;
    throw new SessionError('not_assistant', rule);
  }
  return message;
}

/**
 * Each new provider event is translated with the translator's state rebuilt from the log; its
 * chunks follow the message's recorded ones, and the first carries the event as its `source`
 * (a `raw` chunk stands for an event that means no chunk, so every event is in the log). A
 * repeated seq with the same event is a duplicate; one bad event refuses the whole batch.
 */
function decideDialectEvents(
  command: Extract<SessionCommand, { type: 'append_dialect_events' }>,
  message: MessageState,
): Decision {
  const { dialect, messageId } = command;
  if (message.dialect ? message.dialect.name !== dialect : message.producerChunks) {
    const recorded = message.dialect?.name ?? 'cherry';
    const rule = `message ${messageId} is recorded in the ${recorded} dialect, not ${dialect}`;
    throw new SessionError('dialect_conflict', rule, 'dialect');
  }
  const translator = translatorOf(dialect);
  let translatorState = message.dialect?.state ?? translator.initial;
  const recordedDigests = message.dialect?.eventDigests;
  // Seqs rise by one through the command, so a repeated one is always a recorded event.
  let recorded = recordedDigests?.length ?? 0;
  let cursor = chunkCursor(message);
  const events: DecidedEvent[] = [];
  const duplicateSeqs: number[] = [];
  command.events.forEach((providerEvent, index) => {
    const seq = command.firstSeq + index;
    const unstorable = findUnstorableJson(providerEvent);
    if (unstorable) throw invalidEvent(index, fieldPath(unstorable.path), unstorable.message);
    if (seq <= recorded) {
      if (
        recordedDigests === undefined ||
        keptDigest(recordedDigests, seq - 1) !== providerEventDigest(providerEvent)
      ) {
        const rule = `events[${index}]: seq ${seq} is already recorded with a different event`;
        throw new SessionError('seq_conflict', rule, `events[${index}]`);
      }
      duplicateSeqs.push(seq);
      return;
    }
    if (seq !== recorded + 1) {
      throw new SessionError('seq_gap', `events[${index}]: expected seq ${recorded + 1}, got ${seq}`, 'seq');
    }
    const translated = translateEvent(dialect, translatorState, providerEvent, index);
    translatorState = translated.state;
    recorded += 1;
    const nothing: UnnumberedChunk = { type: 'raw', content: null };
    const chunks = translated.chunks.length > 0 ? translated.chunks : [nothing];
    chunks.forEach((unnumbered, position) => {
      const source: ChunkSource = position === 0 ? { dialect, seq, event: providerEvent } : { dialect, seq };
      const numbered = numberChunk(cursor, unnumbered, source, index);
      cursor = numbered.cursor;
      events.push(numbered.event);
    });
  });
  return { events, duplicateSeqs };
}

function translateEvent(dialect: DialectName, state: unknown, providerEvent: unknown, index: number) {
  try {
    return translatorOf(dialect).translate(state, providerEvent);
  } catch (error) {
    if (error instanceof DialectError) throw invalidEvent(index, error.field, error.message);
    throw error;
  }
}
