import { Inject, Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, In, type EntityManager } from 'typeorm';
import type { EventLogReader } from '#event-log';
import type pg from 'pg';
import { PG_POOL } from '../database/pg-pool-token.js';
import { EVENT_LOG } from '../event-log/event-log-token.js';
import { ApiError } from '../http/api-error.js';
import { reachReadModels, refuseBeyondHead } from '../http/log-positions.js';
import type { ProjectionRunner } from '../projections/projection-runner.js';
import { rowToBlock, type StoredBlockRow } from './read-models/block-rows.js';
import { MessageBlockRow, MessageRow, SessionRow } from './read-models/read-model.entities.js';
import { SessionRepository, type SessionRef } from './session-repository.js';
import {
  foldedMessageView,
  foldedSnapshot,
  forkReference,
  messageView,
  type MessageSummary,
  type SessionSnapshot,
} from './session-views.js';

export const BLOCK_PROJECTION_RUNNER = Symbol('BLOCK_PROJECTION_RUNNER');

/** Which state a read sees: the read models (after `minPosition`, if given), or a fold of the log as of `at`. */
export interface ReadPoint {
  readonly at?: bigint;
  readonly minPosition?: bigint;
  /** The reading credential's latest acknowledged write on this instance: the read models must reflect it too. */
  readonly ownWrite?: bigint;
}

/**
 * Session reads. From the read models, each read runs in one REPEATABLE READ snapshot together
 * with the projection's checkpoint, so the `position` it reports is exactly what it reflects (or
 * the position it waited for, when higher: everything between is other streams' events).
 * With `at`, the session is folded from the log instead, no read model involved.
 */
@Injectable()
export class SessionQueries {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    @Inject(BLOCK_PROJECTION_RUNNER) private readonly runner: ProjectionRunner,
    private readonly sessions: SessionRepository,
    @Inject(EVENT_LOG) private readonly eventLog: EventLogReader,
    @Inject(PG_POOL) private readonly pool: pg.Pool,
  ) {}

  async withSession<T>(
    ref: SessionRef,
    point: ReadPoint,
    use: (snapshot: SessionSnapshot) => Promise<T> | T,
  ): Promise<T> {
    const { tenant, sessionId } = ref;
    if (point.at !== undefined) {
      await refuseBeyondHead(this.eventLog, point.at, 'at');
      const state = await this.sessions.loadAt(ref, point.at, 'read');
      if (state.status !== 'open') throw sessionNotFound();
      return use(foldedSnapshot(state));
    }
    const reached = await this.reach(point);
    // The tables in the order a rebuild's swap locks them (sessions, messages, blocks, then the
    // checkpoint): a read that took the checkpoint first could deadlock with it. One snapshot for all.
    return this.dataSource.transaction('REPEATABLE READ', async (manager) => {
      const session = await manager.findOneBy(SessionRow, { tenant, id: sessionId });
      if (!session) throw sessionNotFound();
      const messages = await manager.find(MessageRow, { where: { tenant, sessionId }, order: { ordinal: 'ASC' } });
      const position = Math.max(await checkpoint(manager), Number(reached ?? 0));
      return use({
        header: {
          id: session.id,
          title: session.title,
          metadata: session.metadata,
          createdAt: session.createdAt.toISOString(),
          forkedFrom: session.forkedFrom && forkReference(session.forkedFrom),
          position,
        },
        selectedRootId: session.selectedRootId,
        messages: messages.map(messageSummary),
        blocksOf: (messageIds) => blocksOf(manager, ref, messageIds),
      });
    });
  }

  async message(ref: SessionRef, messageId: string, point: ReadPoint) {
    const { tenant, sessionId } = ref;
    if (point.at !== undefined) {
      await refuseBeyondHead(this.eventLog, point.at, 'at');
      const state = await this.sessions.loadAt(ref, point.at, 'read');
      const message = state.status === 'open' ? state.messages.get(messageId) : undefined;
      if (!message) throw messageNotFound(sessionId, messageId);
      return foldedMessageView(message);
    }
    await this.reach(point);
    // One statement, so one snapshot for the message and its blocks, in one round trip.
    const { rows } = await this.pool.query<MessageWithBlockRow>({
      name: 'session-message-read',
      text: MESSAGE_WITH_BLOCKS,
      values: [tenant, sessionId, messageId],
    });
    if (rows.length === 0) throw messageNotFound(sessionId, messageId);
    const blocks = rows[0].block === null ? [] : rows.map(({ block }) => rowToBlock(storedBlockRow(block!)));
    return messageView({ ...messageSummary(rows[0]), blocks });
  }

  /**
   * Waits (bounded) until the read models reflect both `minPosition` and the caller's own latest
   * write; the higher of the two. The stored checkpoint may stay below it while only other streams'
   * events follow it (decision 0031), and the read models reflect it all the same.
   */
  private async reach({ minPosition, ownWrite }: ReadPoint): Promise<bigint | undefined> {
    const target = [minPosition, ownWrite].reduce<bigint | undefined>(
      (highest, position) =>
        position !== undefined && (highest === undefined || position > highest) ? position : highest,
      undefined,
    );
    await reachReadModels(this.runner, this.eventLog, target, minPosition);
    return target;
  }
}

/**
 * A message and its blocks in index order: one row per block (the message's columns repeated), or
 * one row with a null `block` when it has none. Each block is a row value, parsed as its columns are.
 */
const MESSAGE_WITH_BLOCKS = `
  SELECT m.id, m.role, m.parent_id AS "parentId", m.selected_child_id AS "selectedChildId", m.model, m.content,
         m.status, m.last_seq AS "lastSeq", m.created_at AS "createdAt", m.position,
         CASE WHEN b.id IS NULL THEN NULL ELSE
           json_build_object('id', b.id, 'messageId', b.message_id, 'type', b.type, 'status', b.status,
             'content', b.content, 'toolId', b.tool_id, 'toolName', b.tool_name, 'arguments', b.arguments,
             'metadata', b.metadata, 'error', b.error, 'extra', b.extra,
             'createdAt', to_char(b.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
             'updatedAt', to_char(b.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')) END AS block
    FROM messages m
    LEFT JOIN message_blocks b ON b.tenant = m.tenant AND b.session_id = m.session_id AND b.message_id = m.id
   WHERE m.tenant = $1 AND m.session_id = $2 AND m.id = $3
   ORDER BY b.index`;

type MessageColumns = Pick<
  MessageRow,
  'id' | 'role' | 'parentId' | 'selectedChildId' | 'model' | 'content' | 'status' | 'lastSeq' | 'createdAt' | 'position'
>;

interface MessageWithBlockRow extends MessageColumns {
  readonly block:
    (Omit<StoredBlockRow, 'createdAt' | 'updatedAt'> & { createdAt: string; updatedAt: string | null }) | null;
}

const storedBlockRow = (block: NonNullable<MessageWithBlockRow['block']>): StoredBlockRow => ({
  ...block,
  createdAt: new Date(block.createdAt),
  updatedAt: block.updatedAt === null ? null : new Date(block.updatedAt),
});

function messageSummary(row: MessageColumns): MessageSummary {
  const { id, role, parentId, selectedChildId, model, content, status, lastSeq } = row;
  return {
    id,
    role,
    parentId,
    selectedChildId,
    model,
    content,
    status,
    lastSeq,
    createdAt: row.createdAt.toISOString(),
    position: Number(row.position),
  };
}

async function blocksOf(manager: EntityManager, { tenant, sessionId }: SessionRef, messageIds: readonly string[]) {
  const where = { tenant, sessionId, messageId: In([...messageIds]) };
  const rows = messageIds.length === 0 ? [] : await manager.find(MessageBlockRow, { where, order: { index: 'ASC' } });
  const blocks = new Map(messageIds.map((id) => [id, [] as ReturnType<typeof rowToBlock>[]]));
  for (const row of rows) blocks.get(row.messageId)!.push(rowToBlock(row));
  return blocks;
}

async function checkpoint(manager: EntityManager): Promise<number> {
  const rows: { position: string }[] = await manager.query(
    `SELECT position FROM projection_checkpoints WHERE name = 'block-read-models'`,
  );
  return Number(rows[0]?.position ?? 0);
}

const sessionNotFound = () => new ApiError(404, 'session_not_found', 'no such session');
const messageNotFound = (sessionId: string, messageId: string) =>
  new ApiError(404, 'message_not_found', `message ${messageId} is not in session ${sessionId}`);
