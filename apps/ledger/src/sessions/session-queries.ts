import { Inject, Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { activePath } from '#core';
import { DataSource } from 'typeorm';
import { ApiError } from '../http/api-error.js';
import type { ProjectionRunner } from '../projections/projection-runner.js';
import { rowToBlock } from './read-models/block-rows.js';
import { MessageBlockRow, MessageRow, SessionRow } from './read-models/read-model.entities.js';
import { messageView } from './session-views.js';

export const BLOCK_PROJECTION_RUNNER = Symbol('BLOCK_PROJECTION_RUNNER');

/** How long a read with `?minPosition` waits for the projection before answering 503. */
const READ_YOUR_WRITES_TIMEOUT_MS = 5_000;

/**
 * Session reads from the read models. Each read runs in one REPEATABLE READ snapshot together
 * with the projection's checkpoint, so the `position` it reports is exactly what it reflects.
 */
@Injectable()
export class SessionQueries {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    @Inject(BLOCK_PROJECTION_RUNNER) private readonly runner: ProjectionRunner,
  ) {}

  async session(sessionId: string, minPosition?: bigint) {
    await this.reach(minPosition);
    return this.dataSource.transaction('REPEATABLE READ', async (manager) => {
      const position = await checkpoint(manager);
      const session = await manager.findOneBy(SessionRow, { id: sessionId });
      if (!session) throw new ApiError(404, 'session_not_found', 'no such session');
      const messages = await manager.find(MessageRow, { where: { sessionId }, order: { ordinal: 'ASC' } });
      const path = activePath(messages);
      const blocks = await manager.find(MessageBlockRow, { where: { sessionId }, order: { index: 'ASC' } });
      return {
        id: session.id,
        title: session.title,
        metadata: session.metadata,
        createdAt: session.createdAt.toISOString(),
        position,
        messages: path.map((message) => rowsView(message, blocks.filter((block) => block.messageId === message.id))),
      };
    });
  }

  async message(sessionId: string, messageId: string, minPosition?: bigint) {
    await this.reach(minPosition);
    return this.dataSource.transaction('REPEATABLE READ', async (manager) => {
      const message = await manager.findOneBy(MessageRow, { id: messageId, sessionId });
      if (!message) throw new ApiError(404, 'message_not_found', `message ${messageId} is not in session ${sessionId}`);
      const blocks = await manager.find(MessageBlockRow, { where: { messageId }, order: { index: 'ASC' } });
      return rowsView(message, blocks);
    });
  }

  private async reach(minPosition: bigint | undefined): Promise<void> {
    if (minPosition === undefined) return;
    if (!(await this.runner.waitForPosition(minPosition, READ_YOUR_WRITES_TIMEOUT_MS))) {
      throw new ApiError(503, 'projection_behind', `the read models have not reached position ${minPosition} within ${READ_YOUR_WRITES_TIMEOUT_MS} ms; retry later`, 'minPosition');
    }
  }
}

function rowsView(message: MessageRow, blocks: readonly MessageBlockRow[]) {
  return messageView({ ...message, createdAt: message.createdAt.toISOString(), position: Number(message.position), blocks: blocks.map(rowToBlock) });
}

async function checkpoint(manager: DataSource['manager']): Promise<number> {
  const rows: { position: string }[] = await manager.query(`SELECT position FROM projection_checkpoints WHERE name = 'block-read-models'`);
  return Number(rows[0]?.position ?? 0);
}
