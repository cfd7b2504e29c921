import type { MessageBlock } from '#core';
import { searchedText, type SearchedText } from './block-search-text.js';

/**
 * A block as its `message_blocks` row holds it (with what the write needs to make its search vector),
 * and back: reads return exactly what was folded.
 */
export interface BlockRowValues extends SearchedText {
  readonly tenant: string;
  readonly id: string;
  readonly message_id: string;
  readonly session_id: string;
  readonly index: number;
  readonly type: string;
  readonly status: string;
  readonly content: unknown;
  readonly tool_id: string | null;
  readonly tool_name: string | null;
  readonly arguments: unknown;
  readonly tool_response: unknown;
  readonly metadata: Readonly<Record<string, unknown>> | null;
  readonly error: Readonly<Record<string, unknown>> | null;
  readonly extra: Readonly<Record<string, unknown>>;
  readonly created_at: string;
  readonly updated_at: string | null;
  readonly position: string;
}

export function blockToRow(
  block: MessageBlock,
  tenant: string,
  sessionId: string,
  index: number,
  position: bigint,
): BlockRowValues {
  const {
    id,
    messageId,
    type,
    status,
    createdAt,
    updatedAt,
    content,
    toolId,
    toolName,
    arguments: args,
    metadata,
    error,
    ...extra
  } = block;
  return {
    tenant,
    id,
    message_id: messageId,
    session_id: sessionId,
    index,
    type,
    status,
    content: content ?? null,
    tool_id: toolId ?? null,
    tool_name: toolName ?? null,
    arguments: args ?? null,
    tool_response: metadata?.rawMcpToolResponse ?? null,
    metadata: metadata ?? null,
    error: error ?? null,
    extra: JSON.parse(JSON.stringify(extra)) as Record<string, unknown>,
    created_at: createdAt,
    updated_at: updatedAt ?? null,
    position: position.toString(),
    ...searchedText(block),
  };
}

/** The stored columns of a block row, as the driver returns them. */
export interface StoredBlockRow {
  id: string;
  messageId: string;
  type: string;
  status: string;
  content: unknown;
  toolId: string | null;
  toolName: string | null;
  arguments: unknown;
  metadata: Record<string, unknown> | null;
  error: Record<string, unknown> | null;
  extra: Record<string, unknown>;
  createdAt: Date;
  updatedAt: Date | null;
}

export function rowToBlock(row: StoredBlockRow): MessageBlock {
  const optional = (key: string, value: unknown) => (value === null || value === undefined ? {} : { [key]: value });
  return {
    id: row.id,
    messageId: row.messageId,
    type: row.type as MessageBlock['type'],
    status: row.status as MessageBlock['status'],
    createdAt: row.createdAt.toISOString(),
    ...optional('updatedAt', row.updatedAt?.toISOString()),
    ...optional('content', row.content),
    ...optional('toolId', row.toolId),
    ...optional('toolName', row.toolName),
    ...optional('arguments', row.arguments),
    ...optional('metadata', row.metadata),
    ...optional('error', row.error),
    ...row.extra,
  };
}
