import { z } from 'zod';
import { findUnstorableJson } from './storable-json.js';

/**
 * The chunk vocabulary: Cherry Studio's `ChunkType` (v1.9.12) with its payload fields. Chunk
 * objects are strict (an unknown top-level field is an error, so typos do not pass silently);
 * nested objects that Cherry itself passes through (tool descriptions, provider responses) are
 * kept as they come.
 */
const json = z.unknown();
const loose = z.object({}).passthrough();

/**
 * A tool call's id is part of its block's id, a key of the block read model: PostgreSQL's index refuses a key over
 * 2,704 bytes, and a 7,000-character id stopped the block projection for every tenant. Providers' ids are tens of
 * characters (`call_…`, `toolu_…`, `fc_…`).
 */
export const MAX_TOOL_ID_LENGTH = 200;

export const mcpToolResponseSchema = z
  .object({
    id: z.string().min(1).max(MAX_TOOL_ID_LENGTH),
    tool: z.object({ name: z.string().min(1) }).passthrough(),
    arguments: json.optional(),
    status: z.enum(['pending', 'streaming', 'invoking', 'done', 'error', 'cancelled']),
    response: json.optional(),
    toolCallId: z.string().optional(),
    partialArguments: z.string().optional(),
  })
  .passthrough();

const toolChunk = { responses: z.array(mcpToolResponseSchema).min(1) };
const responseChunk = { response: loose.optional() };

export const CHUNK_PAYLOADS = {
  llm_response_created: { ...responseChunk },
  'text.start': {},
  'text.delta': { text: z.string(), chunk_id: z.number().int().optional() },
  'text.complete': { text: z.string(), chunk_id: z.number().int().optional() },
  'thinking.start': {},
  'thinking.delta': { text: z.string(), thinking_millsec: z.number().nonnegative().optional() },
  // Ours, not Cherry's, kept so a history can send the reasoning back: `signature`, the provider's signature
  // over the thinking (Anthropic); `item`, the provider's reasoning item as it came (a Responses `reasoning`
  // item with its encrypted content, an Anthropic `redacted_thinking` block).
  'thinking.complete': {
    text: z.string(),
    thinking_millsec: z.number().nonnegative().optional(),
    signature: z.string().optional(),
    item: loose.optional(),
  },
  mcp_tool_streaming: toolChunk,
  mcp_tool_pending: toolChunk,
  mcp_tool_in_progress: toolChunk,
  mcp_tool_complete: toolChunk,
  llm_websearch_in_progress: {},
  llm_websearch_complete: { llm_web_search: z.object({ source: z.string().optional(), results: json }).passthrough() },
  'image.created': {},
  'image.delta': { image: z.object({ type: z.string(), images: z.array(z.string()) }).passthrough() },
  'image.complete': {
    image: z
      .object({ type: z.string(), images: z.array(z.string()) })
      .passthrough()
      .optional(),
  },
  'video.searched': { video: loose, metadata: loose.optional() },
  raw: { content: json },
  block_complete: { ...responseChunk, error: loose.optional() },
  llm_response_complete: { ...responseChunk },
  error: { error: z.object({ name: z.string().optional(), message: z.string().optional() }).passthrough() },
  // Ours: the content of the translation block `POST …/translations` opened, accumulated like text (rule 4).
  'translation.delta': { text: z.string() },
  'translation.complete': { text: z.string() },
} as const;

export type ChunkType = keyof typeof CHUNK_PAYLOADS;
export const CHUNK_TYPES = Object.keys(CHUNK_PAYLOADS) as ChunkType[];

type ChunkSchemas = {
  [Type in ChunkType]: z.ZodType<{ seq: number; type: Type } & z.infer<z.ZodObject<(typeof CHUNK_PAYLOADS)[Type]>>>;
};

/** Looked up by the client's `type` string: a Map, so `constructor` or `__proto__` find nothing. */
const chunkSchemaOf = new Map<string, ChunkSchemas[ChunkType]>(
  CHUNK_TYPES.map((type) => {
    const fields = { seq: z.number().int().positive(), type: z.literal(type), ...CHUNK_PAYLOADS[type] };
    return [type, z.object(fields).strict() as never];
  }),
);

/** Any chunk, by its type: the schemas `parseChunk` applies, as one (the API contract describes the chunk route with it). */
export const chunkSchema = z.union([...chunkSchemaOf.values()] as [
  ChunkSchemas[ChunkType],
  ...ChunkSchemas[ChunkType][],
]);

/** A chunk as a producer posts it: its sequence number, its type, and that type's payload. */
export type Chunk = { [Type in ChunkType]: z.infer<ChunkSchemas[Type]> }[ChunkType];
export type ChunkOf<Type extends ChunkType> = Extract<Chunk, { type: Type }>;
export type McpToolResponse = z.infer<typeof mcpToolResponseSchema>;

/** A validation failure naming the chunk (its index in the batch) and the field. */
export class ChunkValidationError extends Error {
  override readonly name = 'ChunkValidationError';
  constructor(
    readonly index: number,
    readonly field: string,
    /** What is wrong with the field. */
    readonly rule: string,
  ) {
    super(`chunks[${index}].${field}: ${rule}`);
  }
}

/** Validates one chunk; throws `ChunkValidationError` with the first problem. */
export function parseChunk(value: unknown, index: number): Chunk {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new ChunkValidationError(index, '(chunk)', 'must be a JSON object');
  const unstorable = findUnstorableJson(value);
  if (unstorable) {
    throw new ChunkValidationError(index, unstorable.path.map(String).join('.') || '(chunk)', unstorable.message);
  }
  const type = (value as { type?: unknown }).type;
  if (typeof type !== 'string') throw new ChunkValidationError(index, 'type', 'is required and must be a string');
  const schema = chunkSchemaOf.get(type);
  if (!schema) {
    const message = `unknown chunk type ${JSON.stringify(type)}; expected one of ${CHUNK_TYPES.join(', ')}`;
    throw new ChunkValidationError(index, 'type', message);
  }
  const result = schema.safeParse(value);
  if (!result.success) {
    const issue = result.error.issues[0];
    const keys = issue.code === 'unrecognized_keys' ? issue.keys : [];
    const field = [...issue.path, ...keys].map(String).join('.') || '(chunk)';
    throw new ChunkValidationError(
      index,
      field,
      issue.code === 'unrecognized_keys' ? 'is not a field of this chunk type' : issue.message,
    );
  }
  return result.data;
}

/** Validates a whole batch before anything is used: the first bad chunk fails it all. */
export function parseChunks(values: readonly unknown[]): Chunk[] {
  return values.map((value, index) => parseChunk(value, index));
}
