import type { Chunk, ChunkOf, McpToolResponse } from '../chunks/chunk-schemas.js';
import { LayeredMap } from '../layered-map.js';
import {
  OPEN_STATUSES,
  type AttachedFile,
  type BlockStatus,
  type CitationReference,
  type MessageBlock,
  type MessageStatus,
} from './message-block.js';

/**
 * The block ordering rules of one assistant message (DESIGN §4), as a total `evolve` that never
 * throws: a chunk that cannot apply is recorded by the log and leaves the state as it is.
 *
 * Display order is creation order. A placeholder (`llm_response_created`) is taken over in
 * place by the next block to start; every other new block is appended, except the citation of a
 * completed search tool, which goes right after its tool. A translation is opened by the ledger
 * (`message.translation_opened`), after the message's blocks, and filled by translation chunks
 * even after the message ended.
 */
export interface MessageBlocksState {
  readonly messageId: string;
  readonly status: MessageStatus;
  /** Display order; untaken placeholders are dropped when the message completes. */
  readonly blocks: readonly MessageBlock[];
  readonly placeholderId: string | undefined;
  readonly openTextId: string | undefined;
  readonly openThinkingId: string | undefined;
  readonly openImageId: string | undefined;
  readonly webSearchCitationId: string | undefined;
  /** Rule 7: what main_text blocks streamed from now on cite; a provider's search wins over a search tool's, as in Cherry. */
  readonly providerCitation: CitationReference | undefined;
  readonly toolCitation: CitationReference | undefined;
  readonly openTranslationId: string | undefined;
  /** Tool-call id → its block. Layered: a message's calls are not copied for each new one. */
  readonly toolBlockIds: LayeredMap<string>;
  /**
   * Tool-call ids the governance saga has written to: their blocks are the saga's. The producer's
   * chunks for them are recorded and change nothing, and the message's end does not freeze them.
   */
  readonly governedToolIds: LayeredMap<true>;
  /** After `block_complete` or an `error`: later chunks are recorded and change nothing. */
  readonly finalized: boolean;
}

/**
 * The most blocks a message holds. Each chunk's fold copies the list of them (and the decision,
 * the projection and the live hub each fold it), so a message without a bound would make every
 * chunk of it cost more than the last. An agent turn of thousands of tool rounds stays under it.
 */
export const MAX_MESSAGE_BLOCKS = 10_000;

/** A full message adds no block: chunks that would are recorded and change nothing (rule 10). */
export const atBlockLimit = (state: MessageBlocksState) =>
  state.blocks.length + (drafts.get(state.blocks)?.citations.size ?? 0) >= MAX_MESSAGE_BLOCKS;

/** What starts a block may still take a placeholder over on a full message: the list does not grow. */
const startsNoBlock = (state: MessageBlocksState) => state.placeholderId === undefined && atBlockLimit(state);

/** A chunk as the reducer sees it (text snapshots already restored) and when the log recorded it. */
export interface BlockInput {
  readonly chunk: Chunk;
  readonly recordedAt: string;
}

/** Cherry's builtin search tools and the citation source (`WebSearchSource`) their results are. */
const SEARCH_TOOL_SOURCES: Readonly<Record<string, string>> = {
  builtin_web_search: 'websearch',
  builtin_knowledge_search: 'knowledge',
};
const TOOL_ERROR_MESSAGE = 'Tool execution failed/error';

export function initialMessageBlocks(messageId: string): MessageBlocksState {
  return {
    messageId,
    status: 'processing',
    blocks: [],
    placeholderId: undefined,
    openTextId: undefined,
    openThinkingId: undefined,
    openImageId: undefined,
    webSearchCitationId: undefined,
    providerCitation: undefined,
    toolCitation: undefined,
    openTranslationId: undefined,
    toolBlockIds: LayeredMap.empty(),
    governedToolIds: LayeredMap.empty(),
    finalized: false,
  };
}

/** Translation chunks fill a translation block; they are no part of the response the message records. */
export const isTranslationChunk = (chunk: Pick<Chunk, 'type'>) =>
  chunk.type === 'translation.delta' || chunk.type === 'translation.complete';

export function evolveBlocks(state: MessageBlocksState, { chunk, recordedAt: at }: BlockInput): MessageBlocksState {
  // A translation is made of a finished message: its chunks apply after the message's end.
  if (chunk.type === 'translation.delta' || chunk.type === 'translation.complete') return translate(state, chunk, at);
  if (state.finalized) return state;
  const newId = `${state.messageId}-b${chunk.seq}`;
  switch (chunk.type) {
    // Rule 1: a placeholder at the start of a response and after every tool round.
    case 'llm_response_created':
      if (atBlockLimit(state)) return state;
      return {
        ...append(state, {
          id: newId,
          messageId: state.messageId,
          type: 'unknown',
          status: 'processing',
          createdAt: at,
        }),
        placeholderId: newId,
      };

    // Rule 3: one main_text block per text part; only text.complete closes it.
    // Rule 7: a text part cites the message's current citation from its start and with every delta.
    case 'text.start': {
      if (state.openTextId || startsNoBlock(state)) return state;
      const fields = { type: 'main_text', status: 'streaming', content: '', ...citing(state) } as const;
      const started = startBlock(state, newId, at, fields);
      return { ...started.state, openTextId: started.id };
    }
    case 'text.delta':
      return state.openTextId
        ? update(state, state.openTextId, at, { content: chunk.text, status: 'streaming', ...citing(state) })
        : state;
    case 'text.complete':
      return state.openTextId
        ? { ...update(state, state.openTextId, at, { content: chunk.text, status: 'success' }), openTextId: undefined }
        : state;

    // Rule 5: one thinking block per thinking part, after an open text part if there is one.
    case 'thinking.start': {
      if (state.openThinkingId || startsNoBlock(state)) return state;
      const started = startBlock(state, newId, at, { type: 'thinking', status: 'streaming', content: '' });
      return { ...started.state, openThinkingId: started.id };
    }
    case 'thinking.delta':
    case 'thinking.complete': {
      if (!state.openThinkingId) return state;
      const complete = chunk.type === 'thinking.complete';
      const changes: Partial<MessageBlock> = {
        content: chunk.text,
        status: complete ? 'success' : 'streaming',
        ...(chunk.thinking_millsec === undefined ? {} : { thinking_millsec: chunk.thinking_millsec }),
      };
      const kept = chunk.type === 'thinking.complete' ? keptReasoning(chunk) : {};
      const metadata = { ...blockOf(state, state.openThinkingId)?.metadata, ...kept };
      const signed = Object.keys(kept).length === 0 ? changes : { ...changes, metadata };
      const updated = update(state, state.openThinkingId, at, signed);
      return complete ? { ...updated, openThinkingId: undefined } : updated;
    }

    // Rule 6: one block per tool-call id, in call order; a governed call's block is the saga's.
    case 'mcp_tool_streaming':
    case 'mcp_tool_pending':
    case 'mcp_tool_in_progress':
    case 'mcp_tool_complete': {
      const applyResponses = (start: MessageBlocksState) =>
        chunk.responses.reduce(
          (current, response) =>
            state.governedToolIds.has(response.id)
              ? current
              : applyToolResponse(current, chunk.type, response, `${newId}-${response.id}`, at),
          start,
        );
      return chunk.responses.length > 1 ? editedAsDraft(state, applyResponses) : applyResponses(state);
    }

    // Rule 7, provider-side search.
    case 'llm_websearch_in_progress': {
      if (state.webSearchCitationId || startsNoBlock(state)) return state;
      const started = startBlock(state, newId, at, { type: 'citation', status: 'processing' });
      return { ...started.state, webSearchCitationId: started.id };
    }
    case 'llm_websearch_complete':
      return completeWebSearch(state, chunk, newId, at);

    case 'image.created': {
      if (state.openImageId || startsNoBlock(state)) return state;
      const started = startBlock(state, newId, at, { type: 'image', status: 'processing' });
      return { ...started.state, openImageId: started.id };
    }
    case 'image.delta':
    case 'image.complete': {
      if (!state.openImageId) return state;
      const complete = chunk.type === 'image.complete';
      const image = chunk.image;
      const updated = update(state, state.openImageId, at, {
        status: complete ? 'success' : 'streaming',
        ...(image ? { url: image.images[0], metadata: { generateImageResponse: image } } : {}),
      });
      return complete ? { ...updated, openImageId: undefined } : updated;
    }
    case 'video.searched':
      if (startsNoBlock(state)) return state;
      return startBlock(state, newId, at, {
        type: 'video',
        status: 'success',
        metadata: { video: chunk.video, ...chunk.metadata },
      }).state;

    case 'error':
      return failMessage(state, chunk, newId, at);
    case 'block_complete':
      return completeMessage(state, at);
    case 'raw':
    case 'llm_response_complete':
      return state;
  }
}

/** Why a chunk the log records changes nothing on the message's blocks (the chunk route reports it as `ignored`). */
export const IGNORED_REASONS = [
  'message already finalized',
  'no open text part',
  'text part already open',
  'no open thinking part',
  'thinking part already open',
  'no open image',
  'image already open',
  'web search already in progress',
  'unknown tool id',
  'tool call governed by the ledger',
  'no open translation',
  'message at its block limit',
] as const;
export type IgnoredReason = (typeof IGNORED_REASONS)[number];

/**
 * The reason `evolveBlocks` leaves the state as it is for this chunk, case by case beside its rule
 * above; `undefined` when the chunk applies. `raw` and `llm_response_complete` are markers that
 * never change blocks by design (the latter usually follows `block_complete`), so they are never reported.
 */
export function ignoredReason(state: MessageBlocksState, chunk: Chunk): IgnoredReason | undefined {
  if (chunk.type === 'raw' || chunk.type === 'llm_response_complete') return undefined;
  if (isTranslationChunk(chunk)) return state.openTranslationId ? undefined : 'no open translation';
  if (state.finalized) return 'message already finalized';
  switch (chunk.type) {
    case 'llm_response_created':
      return atBlockLimit(state) ? FULL : undefined;
    case 'video.searched':
      return full(state);
    case 'text.start':
      return state.openTextId ? 'text part already open' : full(state);
    case 'text.delta':
    case 'text.complete':
      return state.openTextId ? undefined : 'no open text part';
    case 'thinking.start':
      return state.openThinkingId ? 'thinking part already open' : full(state);
    case 'thinking.delta':
    case 'thinking.complete':
      return state.openThinkingId ? undefined : 'no open thinking part';
    case 'image.created':
      return state.openImageId ? 'image already open' : full(state);
    case 'image.delta':
    case 'image.complete':
      return state.openImageId ? undefined : 'no open image';
    case 'llm_websearch_in_progress':
      return state.webSearchCitationId ? 'web search already in progress' : full(state);
    case 'llm_websearch_complete':
      return state.webSearchCitationId ? undefined : full(state);
    case 'mcp_tool_streaming':
    case 'mcp_tool_pending':
    case 'mcp_tool_in_progress':
    case 'mcp_tool_complete': {
      // Ignored only when no response of the chunk applies; the first response's reason names why.
      const reasons = chunk.responses.map((response): IgnoredReason | undefined => {
        if (state.governedToolIds.has(response.id)) return 'tool call governed by the ledger';
        if (state.toolBlockIds.has(response.id)) return undefined;
        const creates = chunk.type === 'mcp_tool_streaming' || chunk.type === 'mcp_tool_pending';
        return creates ? full(state) : 'unknown tool id';
      });
      return reasons.length > 0 && reasons.every((reason) => reason !== undefined) ? reasons[0] : undefined;
    }
    default:
      return undefined;
  }
}

const FULL: IgnoredReason = 'message at its block limit';
const full = (state: MessageBlocksState): IgnoredReason | undefined => (startsNoBlock(state) ? FULL : undefined);

/**
 * The blocks of a message created whole (an assistant message given its `content`): one
 * finished text block, the message complete, so later chunks change nothing.
 */
export function wholeMessageBlocks(messageId: string, content: string, at: string): MessageBlocksState {
  const block: MessageBlock = {
    id: `${messageId}-b0`,
    messageId,
    type: 'main_text',
    status: 'success',
    content,
    createdAt: at,
  };
  return { ...initialMessageBlocks(messageId), blocks: [block], status: 'success', finalized: true };
}

/** A file a user message attaches by reference, as `POST …/messages` takes it. */
export interface AttachmentReference {
  readonly name: string;
  readonly mimeType: string;
  readonly size: number;
  readonly sha256: string;
  readonly url: string;
}

/**
 * A user message's blocks, as Cherry builds them: its text as a main_text block, then one block
 * per attachment in the order given, an image block for an image (with its URL, so it renders),
 * a file block for any other file. Whole when created: nothing streams into a user message.
 */
export function userMessageBlocks(
  messageId: string,
  content: string | null,
  attachments: readonly AttachmentReference[],
  at: string,
): MessageBlocksState {
  const text: MessageBlock[] = content
    ? [{ id: `${messageId}-text`, messageId, type: 'main_text', status: 'success', createdAt: at, content }]
    : [];
  const files = attachments.map((attachment, index): MessageBlock => {
    const id = `${messageId}-file${index + 1}`;
    const file = attachedFile(id, attachment, at);
    const image = file.type === 'image';
    return {
      id,
      messageId,
      type: image ? 'image' : 'file',
      status: 'success',
      createdAt: at,
      file,
      ...(image ? { url: attachment.url } : {}),
    };
  });
  return { ...initialMessageBlocks(messageId), status: 'success', blocks: [...text, ...files], finalized: true };
}

function attachedFile(
  id: string,
  { name, mimeType, size, sha256, url }: AttachmentReference,
  at: string,
): AttachedFile {
  const dot = name.lastIndexOf('.');
  return {
    id,
    name,
    origin_name: name,
    path: url,
    size,
    ext: dot > 0 ? name.slice(dot).toLowerCase() : '',
    type: fileTypeOf(mimeType),
    created_at: at,
    count: 1,
    mimeType,
    sha256,
    url,
  };
}

const DOCUMENT_TYPES =
  /^application\/(pdf|msword|rtf|vnd\.(openxmlformats-officedocument|oasis\.opendocument|ms-)|epub)/;

/** Cherry's `FileTypes`, from the media type. */
function fileTypeOf(mimeType: string): AttachedFile['type'] {
  const [kind] = mimeType.split('/');
  if (kind === 'image' || kind === 'video' || kind === 'audio' || kind === 'text') return kind;
  return DOCUMENT_TYPES.test(mimeType) ? 'document' : 'other';
}

/** The citation reference a main_text block streamed now carries, as a block field (Cherry's `citationReferences`). */
function citing(state: MessageBlocksState): Pick<MessageBlock, 'citationReferences'> {
  const current = state.providerCitation ?? state.toolCitation;
  return current ? { citationReferences: [current] } : {};
}

/** What `POST …/translations` records: the translation block to open on an assistant message. */
export interface TranslationOpening {
  readonly blockId: string;
  readonly targetLanguage: string;
  readonly sourceLanguage?: string;
  readonly sourceBlockId?: string;
}

/**
 * Opens a translation block after the message's blocks, whether or not the message has ended; a
 * translation still open is left paused (its producer gave it up). Translation chunks fill the open one.
 */
export function openTranslation(
  state: MessageBlocksState,
  { blockId, ...languages }: TranslationOpening,
  at: string,
): MessageBlocksState {
  // The decision refuses a translation on a full message (`message_full`); the fold agrees.
  if (atBlockLimit(state)) return state;
  const previous = state.openTranslationId;
  const paused = previous === undefined ? state : update(state, previous, at, { status: 'paused' });
  const block: MessageBlock = {
    id: blockId,
    messageId: state.messageId,
    type: 'translation',
    status: 'streaming',
    createdAt: at,
    content: '',
    ...languages,
  };
  return { ...append(paused, block), openTranslationId: blockId };
}

function translate(
  state: MessageBlocksState,
  chunk: ChunkOf<'translation.delta' | 'translation.complete'>,
  at: string,
): MessageBlocksState {
  if (!state.openTranslationId) return state;
  const complete = chunk.type === 'translation.complete';
  const updated = update(state, state.openTranslationId, at, {
    content: chunk.text,
    status: complete ? 'success' : 'streaming',
  });
  return complete ? { ...updated, openTranslationId: undefined } : updated;
}

/** `thinking.complete` fields a history sends back to the provider, by the block metadata key that keeps them. */
const KEPT_REASONING = { signature: 'signature', item: 'reasoningItem' } as const;

function keptReasoning(chunk: ChunkOf<'thinking.complete'>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(KEPT_REASONING).flatMap(([field, key]) => {
      const value = chunk[field as keyof typeof KEPT_REASONING];
      return value === undefined ? [] : [[key, value]];
    }),
  );
}

/** A governed tool call's progress, written by the governance saga rather than the producer. */
export interface GovernedToolUpdate {
  /** The call as a tool chunk would carry it: `pending` while governed, `invoking` while executing, `done` or `error` at the end. */
  readonly response: McpToolResponse;
  /** The call's governance record (verdicts, decision, execution), kept in the block's `metadata.governance`. */
  readonly governance: Readonly<Record<string, unknown>>;
}

/**
 * Rule 6 for a call the ledger governs: the saga's update takes the tool block over whole. It
 * applies after the message ended too, and replaces whatever the producer's chunks had shown
 * (result, error, arguments) with the governed call's state, its record in `metadata.governance`.
 */
export function evolveGovernedTool(
  state: MessageBlocksState,
  { response, governance }: GovernedToolUpdate,
  at: string,
): MessageBlocksState {
  const blockId = state.toolBlockIds.get(response.id);
  // Rule 10 on a full message: the call's own stream still records every step.
  if (blockId === undefined && startsNoBlock(state)) return state;
  const governedToolIds = state.governedToolIds.has(response.id)
    ? state.governedToolIds
    : state.governedToolIds.writable().set(response.id, true);
  const governed = { ...state, governedToolIds };
  const finished = response.status === 'done' || response.status === 'error';
  const failed = response.status === 'error';
  const existing = blockId === undefined ? undefined : blockOf(state, blockId);
  const fields: NewBlockFields = {
    type: 'tool',
    status: failed ? 'error' : finished ? 'success' : response.status === 'invoking' ? 'processing' : 'pending',
    toolId: response.id,
    toolName: response.tool.name,
    arguments: response.arguments ?? {},
    ...(finished ? { content: response.response } : {}),
    ...(failed ? { error: { message: TOOL_ERROR_MESSAGE, details: response.response } } : {}),
    metadata: { ...existing?.metadata, rawMcpToolResponse: response, governance },
  };
  if (!existing) {
    const started = startBlock(governed, `${state.messageId}-g${response.id}`, at, fields);
    const next = { ...started.state, toolBlockIds: withToolBlockId(state, response.id, started.id) };
    return finished ? citeSearchResults(next, started.id, response, at) : next;
  }
  const { id, messageId, createdAt } = existing;
  const next = replace(governed, id, () => ({ id, messageId, createdAt, updatedAt: at, ...fields }));
  return finished ? citeSearchResults(next, id, response, at) : next;
}

type ToolChunkType = 'mcp_tool_streaming' | 'mcp_tool_pending' | 'mcp_tool_in_progress' | 'mcp_tool_complete';

function applyToolResponse(
  state: MessageBlocksState,
  chunkType: ToolChunkType,
  response: McpToolResponse,
  newId: string,
  at: string,
): MessageBlocksState {
  const existingId = state.toolBlockIds.get(response.id);
  const creates = chunkType === 'mcp_tool_streaming' || chunkType === 'mcp_tool_pending';
  // Rule 10: a completion or progress report for a tool id never announced changes nothing, nor a new call on a full message.
  if (!existingId && (!creates || startsNoBlock(state))) return state;
  // The block's arguments stay when a chunk leaves them out; read from the block as it is changed (one scan of the list).
  const fieldsOver = (existing: MessageBlock | undefined): Partial<MessageBlock> => ({
    toolId: response.id,
    toolName: response.tool.name,
    arguments: response.arguments ?? existing?.arguments ?? {},
    metadata: { ...existing?.metadata, rawMcpToolResponse: response },
  });
  const failed = response.status === 'error';
  const changes: Partial<MessageBlock> & { readonly status: BlockStatus } =
    chunkType !== 'mcp_tool_complete'
      ? { status: chunkType === 'mcp_tool_in_progress' || response.status === 'invoking' ? 'processing' : 'pending' }
      : {
          status: failed ? 'error' : 'success',
          content: response.response,
          ...(failed ? { error: { message: TOOL_ERROR_MESSAGE, details: response.response } } : {}),
        };
  if (!existingId) {
    // A call that takes a response's placeholder over opens a round, which a history must keep apart from the last one's calls.
    const opensRound = state.placeholderId === undefined ? {} : { opensRound: true };
    const fields = fieldsOver(undefined);
    const metadata = { ...fields.metadata, ...opensRound };
    const started = startBlock(state, newId, at, { type: 'tool', content: undefined, ...fields, ...changes, metadata });
    return { ...started.state, toolBlockIds: withToolBlockId(state, response.id, started.id) };
  }
  const changed = replace(state, existingId, (block) => ({
    ...block,
    ...fieldsOver(block),
    ...changes,
    updatedAt: at,
  }));
  return chunkType === 'mcp_tool_complete' ? citeSearchResults(changed, existingId, response, at) : changed;
}

/**
 * Rule 7, search tools: a builtin search that returned results gets a citation block right after
 * its tool block, `response: {results: <the whole output>, source}`, once however often it completes;
 * main_text blocks streamed from then on cite it.
 */
function citeSearchResults(
  state: MessageBlocksState,
  toolBlockId: string,
  response: McpToolResponse,
  at: string,
): MessageBlocksState {
  const source = Object.hasOwn(SEARCH_TOOL_SOURCES, response.tool.name)
    ? SEARCH_TOOL_SOURCES[response.tool.name]
    : undefined;
  const citationId = `${toolBlockId}-citation`;
  if (!source || atBlockLimit(state) || !hasResults(response.response) || blockOf(state, citationId)) return state;
  const citation: MessageBlock = {
    id: citationId,
    messageId: state.messageId,
    type: 'citation',
    status: 'success',
    createdAt: at,
    response: { results: response.response, source },
  };
  const cited = insertAfter(state, toolBlockId, citation);
  return { ...cited, toolCitation: { citationBlockId: citationId, citationBlockSource: source } };
}

function completeWebSearch(
  state: MessageBlocksState,
  chunk: ChunkOf<'llm_websearch_complete'>,
  newId: string,
  at: string,
): MessageBlocksState {
  const search = chunk.llm_web_search;
  const inProgress = state.webSearchCitationId;
  if (!inProgress && startsNoBlock(state)) return state;
  const started = inProgress
    ? { state: update(state, inProgress, at, { status: 'success', response: search }), id: inProgress }
    : startBlock(state, newId, at, { type: 'citation', status: 'success', response: search });
  const citationId = started.id;
  let next = started.state;
  const reference: CitationReference = {
    citationBlockId: citationId,
    ...(search.source === undefined ? {} : { citationBlockSource: search.source }),
  };
  const firstText = next.blocks.find((block) => block.type === 'main_text');
  if (firstText)
    next = update(next, firstText.id, at, {
      citationReferences: [...(firstText.citationReferences ?? []), reference],
    });
  return { ...next, webSearchCitationId: undefined, providerCitation: reference };
}

/**
 * Rule 8: open blocks fail (pause on abort), partial text stays, an error block is appended, the
 * message fails. A governed call's block is left to the saga, an open translation to its chunks.
 */
function failMessage(
  state: MessageBlocksState,
  chunk: ChunkOf<'error'>,
  newId: string,
  at: string,
): MessageBlocksState {
  const aborted = chunk.error.name === 'AbortError';
  const closedStatus: BlockStatus = aborted ? 'paused' : 'error';
  const blocks = state.blocks.map((block): MessageBlock => {
    if (!OPEN_STATUSES.has(block.status) || leftOpen(state, block)) return block;
    const raw = block.metadata?.rawMcpToolResponse as McpToolResponse | undefined;
    const metadata =
      block.type === 'tool' && raw
        ? { ...block.metadata, rawMcpToolResponse: { ...raw, status: aborted ? 'cancelled' : 'error' } }
        : block.metadata;
    return { ...block, status: closedStatus, updatedAt: at, ...(metadata ? { metadata } : {}) };
  });
  const errorBlock: MessageBlock = {
    id: newId,
    messageId: state.messageId,
    type: 'error',
    status: 'success',
    createdAt: at,
    error: { ...chunk.error },
  };
  return {
    ...closeParts(state),
    blocks: [...blocks, errorBlock],
    status: aborted ? 'paused' : 'error',
    finalized: true,
  };
}

/**
 * Rule 9: every open block succeeds, untaken placeholders leave the display list, the message
 * succeeds. A governed call's block is left to the saga, an open translation to its chunks.
 */
function completeMessage(state: MessageBlocksState, at: string): MessageBlocksState {
  const blocks = state.blocks
    .filter((block) => block.type !== 'unknown')
    .map((block) => {
      if (!OPEN_STATUSES.has(block.status) || leftOpen(state, block)) return block;
      return { ...block, status: 'success' as const, updatedAt: at };
    });
  return { ...closeParts(state), blocks, status: 'success', finalized: true };
}

/** A governed call's block stays open until the saga settles it, an open translation until its last chunk. */
function leftOpen(state: MessageBlocksState, block: MessageBlock): boolean {
  if (block.id === state.openTranslationId) return true;
  return block.type === 'tool' && block.toolId !== undefined && state.governedToolIds.has(block.toolId);
}

function closeParts(state: MessageBlocksState): MessageBlocksState {
  return {
    ...state,
    placeholderId: undefined,
    openTextId: undefined,
    openThinkingId: undefined,
    openImageId: undefined,
    webSearchCitationId: undefined,
  };
}

type NewBlockFields = Omit<MessageBlock, 'id' | 'messageId' | 'createdAt'>;

/** Rules 1 and 2: the next block to start takes the placeholder over in place (same id and position), or is appended. */
function startBlock(
  state: MessageBlocksState,
  newId: string,
  at: string,
  fields: NewBlockFields,
): { state: MessageBlocksState; id: string } {
  const placeholderId = state.placeholderId;
  if (!placeholderId)
    return { state: append(state, { id: newId, messageId: state.messageId, createdAt: at, ...fields }), id: newId };
  const taken = replace(state, placeholderId, ({ id, messageId, createdAt }) => ({
    id,
    messageId,
    createdAt,
    updatedAt: at,
    ...fields,
  }));
  return { state: { ...taken, placeholderId: undefined }, id: placeholderId };
}

function blockOf(state: MessageBlocksState, blockId: string): MessageBlock | undefined {
  const draft = drafts.get(state.blocks);
  if (draft) return draft.citations.get(blockId)?.block ?? state.blocks[placeIn(draft, state.blocks, blockId)];
  return state.blocks.findLast((block) => block.id === blockId);
}

// Outside a draft the list is copied whole at each change, so the copies are the engine's own (`concat`, `with`,
// `toSpliced`): a spread or a `map` of thousands of blocks cost a chunk ten times as much.
function append(state: MessageBlocksState, block: MessageBlock): MessageBlocksState {
  const draft = drafts.get(state.blocks);
  if (!draft) return { ...state, blocks: state.blocks.concat([block]) };
  const list = state.blocks as MessageBlock[];
  draft.places?.set(block.id, list.length);
  list.push(block);
  return { ...state };
}

function insertAfter(state: MessageBlocksState, afterId: string, block: MessageBlock): MessageBlocksState {
  const draft = drafts.get(state.blocks);
  if (draft) {
    draft.citations.set(block.id, { afterId, block });
    return { ...state };
  }
  const index = state.blocks.findIndex((candidate) => candidate.id === afterId);
  return { ...state, blocks: state.blocks.toSpliced(index + 1, 0, block) };
}

/** The block `blockId` replaced by what `change` makes of it; the same state when there is none. */
function replace(
  state: MessageBlocksState,
  blockId: string,
  change: (block: MessageBlock) => MessageBlock,
): MessageBlocksState {
  const draft = drafts.get(state.blocks);
  if (draft) {
    const list = state.blocks as MessageBlock[];
    const index = placeIn(draft, list, blockId);
    if (index < 0) return state;
    list[index] = change(list[index]);
    return { ...state };
  }
  // From the end: the blocks changed most are the newest (an open text part, the last round's calls).
  const index = state.blocks.findLastIndex((block) => block.id === blockId);
  return index < 0 ? state : { ...state, blocks: state.blocks.with(index, change(state.blocks[index])) };
}

/**
 * A list one chunk is still changing: its own copy, changed in place, its blocks found by id through a map made at
 * the first search, and the citations the chunk adds kept aside (so no place moves) until it is finished. A tool
 * chunk of thousands of calls would otherwise copy and search the list once per call. Nothing but that chunk's
 * fold holds the list until then.
 */
interface BlockDraft {
  /** Block id → its place, the last block of an id as `findLast` finds it; made after a few searches from the end. */
  places: Map<string, number> | undefined;
  searches: number;
  /** The tool-call ids as the chunk has set them: one version for all its calls, not one each. */
  toolBlockIds: LayeredMap<string> | undefined;
  /** By the citation's own id. */
  readonly citations: Map<string, { readonly afterId: string; readonly block: MessageBlock }>;
}
const drafts = new WeakMap<readonly MessageBlock[], BlockDraft>();

/** `edit` applied to a draft of the list: the state it makes, or `state` itself when it changed nothing. */
function editedAsDraft(
  state: MessageBlocksState,
  edit: (draft: MessageBlocksState) => MessageBlocksState,
): MessageBlocksState {
  const list = state.blocks.slice();
  const draft: BlockDraft = { places: undefined, searches: 0, toolBlockIds: undefined, citations: new Map() };
  const start = { ...state, blocks: list };
  drafts.set(list, draft);
  try {
    const edited = edit(start);
    if (edited === start) return state;
    return draft.citations.size === 0 ? edited : { ...edited, blocks: withCitations(list, draft) };
  } finally {
    drafts.delete(list);
  }
}

/** A chunk of a few calls on a long list searches it from the end, as outside a draft: a map of it costs more. */
const SEARCHES_BEFORE_A_MAP = 8;

function placeIn(draft: BlockDraft, list: readonly MessageBlock[], blockId: string): number {
  if (!draft.places && ++draft.searches <= SEARCHES_BEFORE_A_MAP)
    return list.findLastIndex((block) => block.id === blockId);
  draft.places ??= new Map(list.map((block, index) => [block.id, index]));
  return draft.places.get(blockId) ?? -1;
}

/** The tool-call ids with `callId`'s block: in a draft, set in the one version the chunk makes. */
function withToolBlockId(state: MessageBlocksState, callId: string, blockId: string): LayeredMap<string> {
  const draft = drafts.get(state.blocks);
  if (!draft) return state.toolBlockIds.writable().set(callId, blockId);
  draft.toolBlockIds ??= state.toolBlockIds.writable();
  return draft.toolBlockIds.set(callId, blockId);
}

/** The draft's list with each citation right after the first block it goes after, as `insertAfter` places it. */
function withCitations(list: readonly MessageBlock[], draft: BlockDraft): MessageBlock[] {
  const byAfterId = new Map([...draft.citations.values()].map(({ afterId, block }) => [afterId, block]));
  return list.flatMap((block) => {
    const citation = byAfterId.get(block.id);
    if (!citation) return [block];
    byAfterId.delete(block.id);
    return [block, citation];
  });
}

function update(
  state: MessageBlocksState,
  blockId: string,
  at: string,
  changes: Partial<MessageBlock>,
): MessageBlocksState {
  return replace(state, blockId, (block) => ({ ...block, ...changes, updatedAt: at }));
}

/** A search output with something to cite: a list, or a list under the fields Cherry's search tools fill. */
function hasResults(result: unknown): boolean {
  if (Array.isArray(result)) return result.length > 0;
  if (result && typeof result === 'object') {
    const { results, content, searchResults, knowledgeReferences } = result as Record<string, unknown>;
    return [results, content, searchResults, knowledgeReferences].some(hasResults);
  }
  return false;
}
