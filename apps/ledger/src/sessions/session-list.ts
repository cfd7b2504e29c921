import { Inject, Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { SessionStatus } from '#core';
import type { EventLogReader } from '#event-log';
import { DataSource } from 'typeorm';
import { EVENT_LOG } from '../event-log/event-log-token.js';
import { ApiError } from '../http/api-error.js';
import { reachReadModels } from '../http/log-positions.js';
import type { ProjectionRunner } from '../projections/projection-runner.js';
import { BLOCK_PROJECTION_RUNNER } from './session-queries.js';

export interface SessionListQuery {
  readonly q?: string;
  readonly model?: string;
  readonly status?: SessionStatus;
  readonly hasPendingApprovals?: boolean;
  readonly hasErrors?: boolean;
  /** ISO times bounding `lastActivityAt`: `from` included, `to` excluded. */
  readonly from?: string;
  readonly to?: string;
  readonly cursor?: string;
  readonly limit: number;
}

interface SessionListRow {
  id: string;
  title: string | null;
  model: string | null;
  status: SessionStatus;
  metadata: Record<string, unknown>;
  created_at: Date;
  last_activity_at: Date;
  message_count: number;
  prompt_tokens: string;
  completion_tokens: string;
  total_tokens: string;
  has_pending_approvals: boolean;
  has_errors: boolean;
}

/** Where a page ends in list order (last activity, newest first, then id): the next page starts after it. */
interface PageEnd {
  readonly lastActivityAt: string;
  readonly sessionId: string;
}

const PENDING_APPROVALS = `EXISTS (SELECT 1 FROM tool_calls t
  WHERE t.tenant = s.tenant AND t.session_id = s.id AND t.status = 'awaiting_approval')`;

/**
 * Over the tsvector columns (migration 1763800000022; a text block's is written by the projection
 * word by word, decision 0042), whose configuration is `simple`: no stemming, no stop words. The
 * subqueries stand alone (each GIN index is scanned once), not per session.
 */
const textMatches = (q: string) => {
  const query = `websearch_to_tsquery('simple', ${q})`;
  return `(s.search @@ ${query}
  OR s.id IN (SELECT m.session_id FROM messages m WHERE m.tenant = $1 AND m.search @@ ${query})
  OR s.id IN (SELECT b.session_id FROM message_blocks b WHERE b.tenant = $1 AND b.search @@ ${query}))`;
};

/**
 * Finds a tenant's sessions in the read models, newest activity first. Pages by keyset (a cursor
 * holding the last row's activity time and id), so sessions recorded while a client pages land
 * before its first page and never shift the pages it has yet to read. A session that is active
 * again meanwhile moves to the front: a client sees it again only by starting over.
 *
 * `q` goes to PostgreSQL's `websearch_to_tsquery` as a bound parameter: quotes, `or`, `-` mean what
 * they mean in a web search box, and no input is a syntax error.
 */
@Injectable()
export class SessionList {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    @Inject(BLOCK_PROJECTION_RUNNER) private readonly runner: ProjectionRunner,
    @Inject(EVENT_LOG) private readonly eventLog: EventLogReader,
  ) {}

  /** `ownWrite`: the reading credential's latest acknowledged write on this instance, which the list must show (read-your-writes). */
  async find(tenant: string, query: SessionListQuery, ownWrite?: bigint) {
    await reachReadModels(this.runner, this.eventLog, ownWrite, undefined);
    const parameters: unknown[] = [tenant];
    const bind = (value: unknown) => `$${parameters.push(value)}`;
    const conditions = ['s.tenant = $1'];
    if (query.q?.trim()) conditions.push(textMatches(bind(query.q)));
    if (query.model !== undefined) conditions.push(`s.model = ${bind(query.model)}`);
    if (query.status !== undefined) conditions.push(`s.status = ${bind(query.status)}`);
    if (query.hasErrors !== undefined) conditions.push(`s.has_errors = ${bind(query.hasErrors)}`);
    if (query.hasPendingApprovals !== undefined)
      conditions.push(`${PENDING_APPROVALS} = ${bind(query.hasPendingApprovals)}`);
    if (query.from !== undefined) conditions.push(`s.last_activity_at >= ${bind(query.from)}::timestamptz`);
    if (query.to !== undefined) conditions.push(`s.last_activity_at < ${bind(query.to)}::timestamptz`);
    if (query.cursor !== undefined) {
      const after = decodeCursor(query.cursor);
      conditions.push(
        `(s.last_activity_at, s.id) < (${bind(after.lastActivityAt)}::timestamptz, ${bind(after.sessionId)})`,
      );
    }
    const rows: SessionListRow[] = await this.dataSource.query(
      `SELECT s.id, s.title, s.model, s.status, s.metadata, s.created_at, s.last_activity_at, s.message_count,
         s.prompt_tokens, s.completion_tokens, s.total_tokens, s.has_errors,
         ${PENDING_APPROVALS} AS has_pending_approvals
       FROM sessions s
       WHERE ${conditions.join(' AND ')}
       ORDER BY s.last_activity_at DESC, s.id DESC
       LIMIT ${bind(query.limit + 1)}`,
      parameters,
    );
    const page = rows.slice(0, query.limit);
    const last = page.at(-1);
    return {
      sessions: page.map(sessionListItem),
      nextCursor:
        rows.length > query.limit && last
          ? encodeCursor({ lastActivityAt: last.last_activity_at.toISOString(), sessionId: last.id })
          : null,
    };
  }
}

function sessionListItem(row: SessionListRow) {
  return {
    sessionId: row.id,
    title: row.title,
    model: row.model,
    status: row.status,
    metadata: row.metadata,
    createdAt: row.created_at.toISOString(),
    lastActivityAt: row.last_activity_at.toISOString(),
    messageCount: row.message_count,
    usage: {
      promptTokens: Number(row.prompt_tokens),
      completionTokens: Number(row.completion_tokens),
      totalTokens: Number(row.total_tokens),
    },
    hasPendingApprovals: row.has_pending_approvals,
    hasErrors: row.has_errors,
  };
}

const encodeCursor = (end: PageEnd) =>
  Buffer.from(JSON.stringify([end.lastActivityAt, end.sessionId])).toString('base64url');

/** As `Date.prototype.toISOString` writes it, which is how cursors are made. */
const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/**
 * A time PostgreSQL takes, as a cursor holds it: written back the same (Date rolls a 30th of
 * February over to March; PostgreSQL refuses it) and of a year from 0001 on (it refuses 0000).
 */
function isCursorTime(value: string): boolean {
  if (!ISO_INSTANT.test(value)) return false;
  const time = new Date(value);
  return !Number.isNaN(time.getTime()) && time.toISOString() === value && time.getUTCFullYear() >= 1;
}

/** Opaque to clients; anything but a cursor this service handed out is a 400. */
function decodeCursor(cursor: string): PageEnd {
  const invalid = new ApiError(400, 'invalid_request', 'cursor: not a cursor this service handed out', 'cursor');
  let decoded: unknown;
  try {
    decoded = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw invalid;
  }
  if (!Array.isArray(decoded) || decoded.length !== 2) throw invalid;
  const [lastActivityAt, sessionId] = decoded as unknown[];
  if (typeof lastActivityAt !== 'string' || typeof sessionId !== 'string') throw invalid;
  if (!isCursorTime(lastActivityAt)) throw invalid;
  if (sessionId.includes('\u0000')) throw invalid;
  return { lastActivityAt, sessionId };
}
