import type { MessageBlock } from '../blocks/message-block.js';
import { canonicalJson } from '../hashing/canonical-json.js';
import { decodedBlock } from '../toolcall/tool-result-encoding.js';

/**
 * A conversation as a model sees it, whatever the provider's format: turns of the system, the
 * user and the assistant. An assistant turn is one ledger message and holds its rounds (seed ADR
 * option 2): what one model call said and called, with each call's result once it is known.
 * Histories are rendered from it, and the gateway reads a provider request into it to find the
 * request's place in the session's tree.
 */
export type Turn =
  | { readonly role: 'system' | 'user'; readonly content: string; readonly attachments?: readonly Attachment[] }
  | { readonly role: 'assistant'; readonly rounds: readonly Round[] };

/** A file a user message attached by reference; present only on turns that have some. */
export interface Attachment {
  readonly name: string;
  readonly mimeType: string;
  readonly size: number;
  readonly sha256: string;
  readonly url: string;
  /** Sent as an image part where the format allows; any other file as a text reference. */
  readonly image: boolean;
}

export interface Round {
  readonly text: string;
  readonly thinking: readonly ThinkingPart[];
  readonly tools: readonly ToolCallPart[];
}

/** Reasoning, with what the provider needs to accept it back: a signature, or its own item (Responses reasoning, redacted thinking). */
export interface ThinkingPart {
  readonly text: string;
  readonly signature?: string;
  readonly item?: Readonly<Record<string, unknown>>;
}

export interface ToolCallPart {
  readonly id: string;
  readonly name: string;
  readonly arguments: unknown;
  /** `undefined` while the call has no result. */
  readonly result: ToolResult | undefined;
  /** Why a call has no result, as its block says (`pending`, `cancelled`, …). */
  readonly status: string;
}

export interface ToolResult {
  /** Strings as they came; an MCP result's text items joined; anything else as canonical JSON. */
  readonly content: string;
  readonly isError: boolean;
  /** An MCP result's image items; present only when it has some. */
  readonly images?: readonly ImageData[];
}

/** An image a tool returned inline (MCP `{type: 'image', data, mimeType}`): base64 data and its media type. */
export interface ImageData {
  readonly data: string;
  readonly mimeType: string;
}

/** A ledger message as the history reads it: its role, its whole content, its blocks in display order. */
export interface HistoryMessage {
  readonly role: string;
  readonly content: string | null;
  readonly blocks: readonly MessageBlock[];
}

/** The turn a ledger message stands for; a tool-role message has none (its results live in the assistant's tool blocks). */
export function turnOf(message: HistoryMessage): Turn | undefined {
  if (message.role === 'system' || message.role === 'user') {
    const attachments = message.blocks.flatMap(attachmentOf);
    return { role: message.role, content: message.content ?? '', ...(attachments.length > 0 ? { attachments } : {}) };
  }
  if (message.role !== 'assistant') return undefined;
  if (message.blocks.length === 0) {
    return { role: 'assistant', rounds: message.content ? [{ text: message.content, thinking: [], tools: [] }] : [] };
  }
  return { role: 'assistant', rounds: roundsOf(message.blocks) };
}

/**
 * A round is the blocks up to and including its tool calls: a text or thinking block after a
 * tool block starts the next round, and so does a call that opened a response (a round of calls
 * only). Citation, image, video and error blocks are display only.
 */
function roundsOf(blocks: readonly MessageBlock[]): Round[] {
  const rounds: { text: string[]; thinking: ThinkingPart[]; tools: ToolCallPart[] }[] = [];
  let current: (typeof rounds)[number] | undefined;
  for (const block of blocks) {
    if (block.type !== 'main_text' && block.type !== 'thinking' && block.type !== 'tool') continue;
    const opensRound = block.type === 'tool' ? block.metadata?.opensRound === true : current?.tools.length !== 0;
    if (!current || (opensRound && (current.tools.length > 0 || current.text.length > 0))) {
      current = { text: [], thinking: [], tools: [] };
      rounds.push(current);
    }
    if (block.type === 'tool') current.tools.push(toolCallOf(block));
    else if (block.type === 'thinking') {
      const thinking = thinkingOf(block);
      if (thinking) current.thinking.push(thinking);
    } else if (typeof block.content === 'string' && block.content !== '') current.text.push(block.content);
  }
  return rounds
    .map((round) => ({ text: round.text.join('\n\n'), thinking: round.thinking, tools: round.tools }))
    .filter((round) => round.text !== '' || round.tools.length > 0);
}

function thinkingOf(block: MessageBlock): ThinkingPart | undefined {
  const text = typeof block.content === 'string' ? block.content : '';
  const signature = block.metadata?.signature;
  const item = block.metadata?.reasoningItem;
  if (text === '' && item === undefined) return undefined;
  return {
    text,
    ...(typeof signature === 'string' ? { signature } : {}),
    ...(item !== null && typeof item === 'object' ? { item: item as Record<string, unknown> } : {}),
  };
}

function toolCallOf(block: MessageBlock): ToolCallPart {
  const raw = block.metadata?.rawMcpToolResponse as { status?: string } | undefined;
  const call = {
    id: block.toolId ?? block.id,
    name: block.toolName ?? 'unknown_tool',
    arguments: block.arguments ?? {},
    status: raw?.status ?? block.status,
  };
  // A result the saga stored wrapped goes to the model as it came.
  const content = decodedBlock(block).content;
  const finished = block.status === 'success' || block.status === 'error';
  if (!finished || content === undefined || content === null) return { ...call, result: undefined };
  const isError = block.status === 'error';
  if (typeof content === 'string') return { ...call, result: { content, isError } };
  return { ...call, result: mcpResultOf(content, isError) ?? { content: canonicalJson(content), isError } };
}

/**
 * An MCP `CallToolResult` as a model reads it, not as the JSON of its wrapper: its text items
 * joined, its images apart (each history format places them as it can), other items (resources,
 * audio) as their JSON, `structuredContent` when there is no item, and `isError` kept.
 */
function mcpResultOf(result: unknown, failed: boolean): ToolResult | undefined {
  if (result === null || typeof result !== 'object' || Array.isArray(result)) return undefined;
  const { content, isError, structuredContent } = result as Record<string, unknown>;
  const items = Array.isArray(content) ? (content as unknown[]) : undefined;
  if (!items?.every((item) => typeof (item as { type?: unknown } | null)?.type === 'string')) return undefined;
  const texts: string[] = [];
  const images: ImageData[] = [];
  for (const item of items as Record<string, unknown>[]) {
    if (item.type === 'text' && typeof item.text === 'string') texts.push(item.text);
    else if (item.type === 'image' && typeof item.data === 'string' && typeof item.mimeType === 'string')
      images.push({ data: item.data, mimeType: item.mimeType });
    else texts.push(canonicalJson(item));
  }
  if (items.length === 0 && structuredContent !== undefined) texts.push(canonicalJson(structuredContent));
  return {
    content: texts.filter((text) => text !== '').join('\n'),
    isError: failed || isError === true,
    ...(images.length > 0 ? { images } : {}),
  };
}

/** A user message's file or image block, as the attachment it stands for. */
function attachmentOf(block: MessageBlock): Attachment[] {
  if ((block.type !== 'file' && block.type !== 'image') || !block.file) return [];
  const { origin_name: name, mimeType, size, sha256, url } = block.file;
  return [{ name, mimeType, size, sha256, url, image: block.type === 'image' }];
}

/**
 * What a model is told of a call: its result, or for one that never finished, was denied or was
 * cut off, an error saying so. Calls the conversation's last round still waits on have none yet:
 * whoever continues the conversation brings their results.
 */
export function resultOf(call: ToolCallPart): ToolResult | undefined {
  if (call.status === AWAITED) return undefined;
  return (
    call.result ?? {
      content: canonicalJson({ error: `the tool call did not complete (status: ${call.status})` }),
      isError: true,
    }
  );
}

const AWAITED = 'awaited';
const OPEN_CALL_STATUSES = new Set(['pending', 'streaming', 'invoking', 'processing']);

/** The conversation of a path of ledger messages; the open calls of its last round are awaited, not failed. */
export function conversationOf(path: readonly HistoryMessage[]): Turn[] {
  const turns = path.flatMap((message) => turnOf(message) ?? []);
  const last = turns.at(-1);
  const lastRound = last?.role === 'assistant' ? last.rounds.at(-1) : undefined;
  if (!last || !lastRound) return turns;
  const tools = lastRound.tools.map((tool) =>
    tool.result === undefined && OPEN_CALL_STATUSES.has(tool.status) ? { ...tool, status: AWAITED } : tool,
  );
  return [
    ...turns.slice(0, -1),
    {
      role: 'assistant',
      rounds: [...(last as { rounds: readonly Round[] }).rounds.slice(0, -1), { ...lastRound, tools }],
    },
  ];
}
