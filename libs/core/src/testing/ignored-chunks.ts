import { MAX_MESSAGE_BLOCKS, type IgnoredReason } from '../blocks/block-rules.js';

/**
 * One batch per reason a recorded chunk changes nothing, as a producer posts it (seqs from 1 on),
 * with the seq that is ignored. The decider's unit test and the chunk route's e2e test share them.
 */
export interface IgnoredChunkCase {
  readonly label: string;
  readonly chunks: readonly Record<string, unknown>[];
  readonly seq: number;
  readonly reason: IgnoredReason;
}

const image = { type: 'url', images: ['https://example.com/a.png'] };
const unknownCall = { id: 'ghost', tool: { id: 'fs-read', name: 'read' }, status: 'done', response: 'r' };

/** `count` pending tool calls as a tool chunk's responses, `call-<from>` on: each opens a block. */
export const pendingToolCalls = (count: number, from = 0) =>
  Array.from({ length: count }, (_, index) => ({
    id: `call-${from + index}`,
    tool: { id: 'fs-read', name: 'read' },
    status: 'pending',
  }));

/** One chunk that fills a message: as many calls as it may hold blocks. */
const fillingChunk = { type: 'mcp_tool_pending', responses: pendingToolCalls(MAX_MESSAGE_BLOCKS) };

export const IGNORED_CHUNK_CASES: readonly IgnoredChunkCase[] = [
  {
    label: 'text.delta before text.start',
    chunks: [{ type: 'text.delta', text: 'x' }],
    seq: 1,
    reason: 'no open text part',
  },
  {
    label: 'text.complete before text.start',
    chunks: [{ type: 'text.complete', text: 'x' }],
    seq: 1,
    reason: 'no open text part',
  },
  {
    label: 'a second text.start',
    chunks: [{ type: 'text.start' }, { type: 'text.start' }],
    seq: 2,
    reason: 'text part already open',
  },
  {
    label: 'thinking.delta alone',
    chunks: [{ type: 'thinking.delta', text: 'x' }],
    seq: 1,
    reason: 'no open thinking part',
  },
  {
    label: 'a second thinking.start',
    chunks: [{ type: 'thinking.start' }, { type: 'thinking.start' }],
    seq: 2,
    reason: 'thinking part already open',
  },
  { label: 'image.delta alone', chunks: [{ type: 'image.delta', image }], seq: 1, reason: 'no open image' },
  {
    label: 'a second image.created',
    chunks: [{ type: 'image.created' }, { type: 'image.created' }],
    seq: 2,
    reason: 'image already open',
  },
  {
    label: 'a second search start',
    chunks: [{ type: 'llm_websearch_in_progress' }, { type: 'llm_websearch_in_progress' }],
    seq: 2,
    reason: 'web search already in progress',
  },
  {
    label: 'a completion for a tool id never announced',
    chunks: [{ type: 'mcp_tool_complete', responses: [unknownCall] }],
    seq: 1,
    reason: 'unknown tool id',
  },
  {
    label: 'a new response on a full message',
    chunks: [fillingChunk, { type: 'llm_response_created' }],
    seq: 2,
    reason: 'message at its block limit',
  },
  {
    label: 'a chunk after block_complete',
    chunks: [{ type: 'block_complete' }, { type: 'text.start' }],
    seq: 2,
    reason: 'message already finalized',
  },
  {
    label: 'a chunk after an error',
    chunks: [{ type: 'error', error: { message: 'boom' } }, { type: 'text.start' }],
    seq: 2,
    reason: 'message already finalized',
  },
];
