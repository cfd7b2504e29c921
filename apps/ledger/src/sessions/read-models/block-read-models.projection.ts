import {
  initialSessionState,
  messageStatus,
  lastSeq,
  parseSessionStreamId,
  foldFootprint,
  SizedCache,
  SESSION_STREAM_PREFIX,
  sessionChanges,
  summarizeChanges,
  summarizeSession,
  type SessionChanges,
  type SessionState,
  type SessionTally,
} from '#core';
import type { EventLogReader, ProjectionEvent } from '#event-log';
import type { BatchStatement, ProjectionDefinition } from '../../projections/projection.js';
import { defaultFoldCacheBytes, MAX_CACHED_FOLDS } from '../fold-cache.js';
import { foldSessionEvents } from '../session-fold.js';
import { blockToRow, type BlockRowValues } from './block-rows.js';

/**
 * Sessions, messages (with their selected child) and their blocks, folded from session events
 * with the core reducer. A batch is folded in memory; then only what changed is written, each
 * row once, in multi-row upserts guarded by position (replays never move a row back). A fork's
 * rows are written from its source's state at the fork position: the log holds the reference,
 * the read model the resolved tree, so reads need no join across sessions.
 */
export function blockReadModelsProjection(cacheBytes = defaultFoldCacheBytes()): ProjectionDefinition<ProjectionEvent> {
  const sessions = new SizedCache<string, FoldedSession>(MAX_CACHED_FOLDS, cacheBytes);
  const remember = (streamId: string, folded: FoldedSession) => sessions.set(streamId, folded, folded.footprint);

  return {
    name: 'block-read-models',
    version: 1,
    filter: { streamPrefixes: [SESSION_STREAM_PREFIX] },
    reset: () => sessions.clear(),
    async writes(events, { eventLog }) {
      // Sessions are independent: each one's events of the batch are folded in one go, in order.
      const byStream = new Map<string, ProjectionEvent[]>();
      for (const event of events) {
        const own = byStream.get(event.streamId);
        if (own) own.push(event);
        else byStream.set(event.streamId, [event]);
      }
      const changes: Change[] = [];
      for (const [streamId, own] of byStream) {
        const previous = sessions.get(streamId) ?? (await foldBefore(eventLog, own[0]));
        const state = await foldSessionEvents(eventLog, previous.state, own, 'read');
        const footprint = foldFootprint(state, previous);
        const changed = sessionChanges(previous.state, state);
        if (!changed) {
          remember(streamId, { state, summary: previous.summary, footprint });
          continue;
        }
        const summary = previous.summary
          ? summarizeChanges(previous.summary, changed)
          : summarizeSession(changed.session);
        remember(streamId, { state, summary, footprint });
        const lastActivityAt = own.at(-1)!.metadata.recordedAt;
        changes.push({ tenant: parseSessionStreamId(streamId)!.tenant, changed, summary, lastActivityAt });
      }
      return changesStatement(changes);
    },
  };
}

/** A session's state just before `event`, folded from its stream (after a restart, or for a session not seen lately). */
async function foldBefore(eventLog: EventLogReader, event: ProjectionEvent): Promise<FoldedSession> {
  const state =
    event.revision === 0n
      ? initialSessionState
      : await foldSessionEvents(
          eventLog,
          initialSessionState,
          await eventLog.readStream(event.streamId, { maxCount: Number(event.revision) }),
          'read',
        );
  return { state, summary: undefined, footprint: foldFootprint(state) };
}

/** A session's state as the projection last folded it, with its summary once it has one, and what it holds in memory. */
interface FoldedSession {
  readonly state: SessionState;
  readonly summary: SessionTally | undefined;
  readonly footprint: number;
}

interface Change {
  readonly tenant: string;
  readonly changed: SessionChanges;
  readonly summary: SessionTally;
  /** When the session's last event of the batch was recorded. */
  readonly lastActivityAt: string;
}

/**
 * A block row's search vector (decision 0042) from its text `r.block_text` and the row it replaces,
 * `old`. A streaming block's words before its last cut (`searchedText`) are finished: weight D. The
 * text from the cut on may still grow: weight A, so the next write drops it (`ts_filter`) and
 * tokenizes only the text from the old cut on, starting at that cut's blank as the whole text does.
 * That holds while both rows stream and the old finished text and its cut start the new text; any
 * other write, the block's last included, tokenizes the text whole. The old row's status is checked
 * because only a streaming row's cut lies at a blank. `@@` ignores weights; nothing ranks.
 */
const SEARCH_VECTOR = `CASE
    WHEN old.status = 'streaming' AND r.status = 'streaming' AND old.search_finished_chars <= r.search_finished_chars
      AND left(old.content #>> '{}', old.search_finished_chars + 1) = left(r.block_text, old.search_finished_chars + 1)
    THEN ts_filter(old.search, '{d}') || to_tsvector('simple',
      substr(r.block_text, old.search_finished_chars + 1, r.search_finished_chars - old.search_finished_chars))
    ELSE to_tsvector('simple', left(r.block_text, r.search_finished_chars))
  END || setweight(to_tsvector('simple',
    substr(r.block_text, r.search_finished_chars + 1, r.searched_chars - r.search_finished_chars)), 'A')`;

/** The batch's changed rows as one statement; none when nothing changed. */
function changesStatement(changes: readonly Change[]): BatchStatement | undefined {
  const sessionRows: object[] = [];
  const messageRows: object[] = [];
  // By key: two blocks can have one id (a tool call's id can spell another block's), and a statement that writes a row
  // twice fails, and with it the batch, again at every retry: the projection would stop for every tenant.
  const blockRows = new Map<string, BlockRowValues>();
  const removedBlocks = new Map<string, { tenant: string; session_id: string; id: string }>();
  const keyOf = (tenant: string, sessionId: string, id: string) => JSON.stringify([tenant, sessionId, id]);
  for (const { tenant, changed, summary, lastActivityAt } of changes) {
    const { session } = changed;
    sessionRows.push({
      tenant,
      id: session.sessionId,
      title: session.title,
      metadata: session.metadata,
      created_at: session.createdAt,
      selected_root_id: session.selectedRootId,
      forked_from: session.forkedFrom,
      model: summary.model,
      status: summary.status,
      has_errors: summary.hasErrors,
      message_count: summary.messageCount,
      prompt_tokens: summary.usage.promptTokens,
      completion_tokens: summary.usage.completionTokens,
      total_tokens: summary.usage.totalTokens,
      last_activity_at: lastActivityAt,
      position: session.position.toString(),
    });
    for (const { message, ordinal } of changed.messages) {
      messageRows.push({
        tenant,
        id: message.id,
        session_id: session.sessionId,
        ordinal,
        role: message.role,
        parent_id: message.parentId,
        selected_child_id: message.selectedChildId,
        model: message.model,
        content: message.content,
        status: messageStatus(message),
        last_seq: lastSeq(message),
        created_at: message.createdAt,
        position: message.position.toString(),
      });
    }
    for (const { block, index, message } of changed.blocks) {
      blockRows.set(
        keyOf(tenant, session.sessionId, block.id),
        blockToRow(block, tenant, session.sessionId, index, message.blockPositions[index] ?? message.position),
      );
    }
    for (const { id } of changed.removedBlocks)
      removedBlocks.set(keyOf(tenant, session.sessionId, id), { tenant, session_id: session.sessionId, id });
  }
  if (sessionRows.length === 0) return undefined;
  // One statement, one round trip: the sub-statements touch disjoint rows (a block is either still
  // displayed, so upserted, or removed), and each row is written once per batch. The tables come in
  // the order a rebuild's swap locks them (sessions, messages, message_blocks), so the two never deadlock.
  // Named: each connection sends and plans it once (decision 0038). PostgreSQL parses it again after a
  // rebuild's swap, or under the rebuild's search_path, so it always writes the tables its names resolve to.
  // Each changed block's old row is looked up by key (OFFSET 0 keeps the lookup from being merged into a join):
  // the planner takes a row set for a hundred rows, and joined, it read the whole table for a batch of one block
  // on every table of up to a few thousand blocks (2.6 ms for 1,069 blocks, against 0.02 by key; decision 0053).
  // Only a streaming block's (its search vector alone reads it), and by its message and place too: where the
  // statistics are older than a session's growth, the planner may take the index of a message's blocks for the
  // lookup, which then read every block of the session; now either index finds the one row. A block that moved
  // (a citation went in before it) has its vector made whole, as after a rewrite (decision 0067).
  // Removed blocks (a placeholder replaced, once a message) are deleted by key through the join: a row changed
  // meanwhile is checked again by its key, where a delete by its place would pass it over.
  // A block's text for its search vector is taken out of its jsonb once per row (OFFSET 0 keeps the subquery from
  // being pulled up into each of its five uses) and only as far as search reads it: a block of megabytes was
  // copied out whole five times per write (issue 15's thirty-ninth round).
  return {
    name: 'block-read-models-write',
    text: `WITH session_rows AS (
       INSERT INTO sessions (tenant, id, title, metadata, created_at, selected_root_id, forked_from, model, status,
         has_errors, message_count, prompt_tokens, completion_tokens, total_tokens, last_activity_at, position)
       SELECT tenant, id, title, metadata, created_at, selected_root_id, forked_from, model, status, has_errors,
         message_count, prompt_tokens, completion_tokens, total_tokens, last_activity_at,
         position FROM jsonb_to_recordset($2::jsonb)
         AS r(tenant text, id text, title text, metadata jsonb, created_at timestamptz, selected_root_id text,
           forked_from jsonb, model text, status text, has_errors boolean, message_count int, prompt_tokens bigint,
           completion_tokens bigint, total_tokens bigint, last_activity_at timestamptz, position bigint)
       ON CONFLICT (tenant, id) DO UPDATE SET title = excluded.title, metadata = excluded.metadata,
         selected_root_id = excluded.selected_root_id, model = excluded.model, status = excluded.status,
         has_errors = excluded.has_errors, message_count = excluded.message_count,
         prompt_tokens = excluded.prompt_tokens, completion_tokens = excluded.completion_tokens,
         total_tokens = excluded.total_tokens, last_activity_at = excluded.last_activity_at,
         position = excluded.position
         WHERE sessions.position <= excluded.position
     ), message_rows AS (
       INSERT INTO messages (tenant, id, session_id, ordinal, role, parent_id, selected_child_id, model, content,
        status, last_seq, created_at, position)
       SELECT tenant, id, session_id, ordinal, role, parent_id, selected_child_id, model, content, status, last_seq,
         created_at, position FROM jsonb_to_recordset($3::jsonb)
         AS r(tenant text, id text, session_id text, ordinal int, role text, parent_id text, selected_child_id text,
           model text, content text, status text, last_seq int, created_at timestamptz, position bigint)
       ON CONFLICT (tenant, session_id, id) DO UPDATE SET selected_child_id = excluded.selected_child_id,
         status = excluded.status, last_seq = excluded.last_seq, position = excluded.position
         WHERE messages.position <= excluded.position
     ), removed AS (
       DELETE FROM message_blocks USING jsonb_to_recordset($1::jsonb) AS r(tenant text, session_id text, id text)
       WHERE message_blocks.tenant = r.tenant AND message_blocks.session_id = r.session_id AND message_blocks.id = r.id
     )
     INSERT INTO message_blocks (tenant, id, message_id, session_id, index, type, status, content, tool_id,
        tool_name, arguments, tool_response, metadata, error, extra, created_at, updated_at, position, search,
        search_finished_chars)
       SELECT r.tenant, r.id, r.message_id, r.session_id, r.index, r.type, r.status, r.content, r.tool_id, r.tool_name,
         r.arguments, r.tool_response, r.metadata, r.error, r.extra, r.created_at, r.updated_at, r.position,
         ${SEARCH_VECTOR}, r.search_finished_chars
         FROM (SELECT *,
             CASE WHEN searched_chars > 0 THEN left(content #>> '{}', searched_chars + 1) ELSE '' END AS block_text
           FROM jsonb_to_recordset($4::jsonb) AS r(tenant text, id text, message_id text, session_id text, index int,
             type text, status text, content jsonb, tool_id text, tool_name text, arguments jsonb, tool_response jsonb,
             metadata jsonb, error jsonb, extra jsonb, created_at timestamptz, updated_at timestamptz, position bigint,
             search_finished_chars int, searched_chars int) OFFSET 0) r
         LEFT JOIN LATERAL (
           SELECT status, content, search, search_finished_chars FROM message_blocks old
            WHERE r.status = 'streaming' AND old.tenant = r.tenant AND old.session_id = r.session_id
              AND old.message_id = r.message_id AND old.index = r.index AND old.id = r.id OFFSET 0) old ON true
       ON CONFLICT (tenant, session_id, id) DO UPDATE SET index = excluded.index, type = excluded.type,
         status = excluded.status, content = excluded.content, tool_id = excluded.tool_id,
         tool_name = excluded.tool_name, arguments = excluded.arguments, tool_response = excluded.tool_response,
         metadata = excluded.metadata, error = excluded.error, extra = excluded.extra, updated_at = excluded.updated_at,
         position = excluded.position, search = excluded.search, search_finished_chars = excluded.search_finished_chars
       WHERE message_blocks.position <= excluded.position`,
    values: [
      [...removedBlocks].flatMap(([key, removed]) => (blockRows.has(key) ? [] : [removed])),
      sessionRows,
      messageRows,
      [...blockRows.values()],
    ].map((rows) => JSON.stringify(rows)),
  };
}
