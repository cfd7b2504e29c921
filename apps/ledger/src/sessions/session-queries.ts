import { Inject, Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, In, type EntityManager } from 'typeorm';
import type { EventLogReader } from '#event-log';
import { EVENT_LOG } from '../event-log/event-log.module.js';
import { ApiError } from '../http/api-error.js';
import { reachReadModels, refuseBeyondHead } from '../http/log-positions.js';
import type { ProjectionRunner } from '../projections/projection-runner.js';
import { rowToBlock } from './read-models/block-rows.js';
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
    return this.dataSource.transaction('REPEATABLE READ', async (manager) => {
      const message = await manager.findOneBy(MessageRow, { tenant, id: messageId, sessionId });
      if (!message) throw messageNotFound(sessionId, messageId);
      const blocks = await blocksOf(manager, ref, [messageId]);
      return messageView({ ...messageSummary(message), blocks: blocks.get(messageId) ?? [] });
    });
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

function messageSummary(row: MessageRow): MessageSummary {
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
