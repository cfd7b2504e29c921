import type { MessageBlock } from '#core';

/** A block as its `message_blocks` row holds it, and back: reads return exactly what was folded. */
export interface BlockRowValues {
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
  /** Code points of the text whose words the search vector holds as finished (`searchedText`). */
  readonly search_finished_chars: number;
  /** Code points of the text the search vector covers; not stored, the write reads it. */
  readonly searched_chars: number;
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

/** The first code points of a text block that search covers, so no row outgrows a tsvector (1 MB). */
const SEARCHED_CODE_POINTS = 65_536;

/**
 * How much of a block's text its search vector covers, in code points as PostgreSQL counts
 * characters (decision 0042). While a text block streams, its last word may still grow: the words
 * up to its last blank are finished, and the projection tokenizes only those it has not seen. Once
 * the block stops streaming, every word is finished. Only text blocks are searched.
 */
function searchedText(block: MessageBlock): Pick<BlockRowValues, 'search_finished_chars' | 'searched_chars'> {
  if (block.type !== 'main_text' || typeof block.content !== 'string')
    return { search_finished_chars: 0, searched_chars: 0 };
  const searched = leadingCodePoints(block.content, SEARCHED_CODE_POINTS);
  const searchedChars = codePointLength(searched);
  if (block.status !== 'streaming') return { search_finished_chars: searchedChars, searched_chars: searchedChars };
  let end = searched.length;
  // Blanks PostgreSQL's parser reads inside no word (only inside an HTML tag, which `simple` does not index):
  // words cut after one are the words of the whole.
  while (end > 0 && !BLANKS.has(searched.charCodeAt(end - 1))) end--;
  return { search_finished_chars: codePointLength(searched.slice(0, end)), searched_chars: searchedChars };
}

/** Space, tab, line feed, carriage return. */
const BLANKS = new Set([0x20, 0x09, 0x0a, 0x0d]);

const isSurrogatePair = (text: string, index: number) =>
  (text.charCodeAt(index) & 0xfc00) === 0xd800 && (text.charCodeAt(index + 1) & 0xfc00) === 0xdc00;

/** The first `count` code points of `text`. */
function leadingCodePoints(text: string, count: number): string {
  if (text.length <= count) return text;
  let end = 0;
  for (let points = 0; points < count && end < text.length; points++) end += isSurrogatePair(text, end) ? 2 : 1;
  return text.slice(0, end);
}

/** Code points in `text`: a surrogate pair is one character to PostgreSQL. */
function codePointLength(text: string): number {
  let length = 0;
  for (let index = 0; index < text.length; length++) index += isSurrogatePair(text, index) ? 2 : 1;
  return length;
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
