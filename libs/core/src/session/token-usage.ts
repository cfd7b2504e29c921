import type { Chunk } from '../chunks/chunk-schemas.js';

/** Tokens the model calls behind a message used, in one vocabulary whatever the provider called them. */
export interface TokenUsage {
  readonly promptTokens: number;
  readonly completionTokens: number;
  readonly totalTokens: number;
}

export const NO_TOKENS: TokenUsage = { promptTokens: 0, completionTokens: 0, totalTokens: 0 };

/**
 * Usage added up, each count held at `MAX_TOKEN_COUNT`: a producer reports what it likes, and a thousand reports of 2^53
 * tokens summed past PostgreSQL's bigint, which stopped the session list's projection for every tenant.
 */
export const addUsage = (a: TokenUsage, b: TokenUsage): TokenUsage => ({
  promptTokens: Math.min(a.promptTokens + b.promptTokens, MAX_TOKEN_COUNT),
  completionTokens: Math.min(a.completionTokens + b.completionTokens, MAX_TOKEN_COUNT),
  totalTokens: Math.min(a.totalTokens + b.totalTokens, MAX_TOKEN_COUNT),
});

/** The most tokens a count says: what a double holds exactly, and a bigint column. A count held there is not exact. */
export const MAX_TOKEN_COUNT = Number.MAX_SAFE_INTEGER;

export const subtractUsage = (a: TokenUsage, b: TokenUsage): TokenUsage => ({
  promptTokens: a.promptTokens - b.promptTokens,
  completionTokens: a.completionTokens - b.completionTokens,
  totalTokens: a.totalTokens - b.totalTokens,
});

/**
 * A message's usage after one more of its chunks. Each model call ends in one chunk:
 * `llm_response_complete` after a tool round, `block_complete` at the end. Translated from a
 * dialect (ADR 0015), each end carries its own call's usage, so they add up; Cherry Studio gives
 * `block_complete` the usage of all the message's calls together, so that replaces the sum.
 */
export function usageAfter(usage: TokenUsage, chunk: Chunk, translated: boolean): TokenUsage {
  if (chunk.type !== 'llm_response_complete' && chunk.type !== 'block_complete') return usage;
  const reported = reportedUsage(chunk.response?.usage);
  if (!reported) return usage;
  return chunk.type === 'block_complete' && !translated ? reported : addUsage(usage, reported);
}

/**
 * A provider's `usage` object: OpenAI Chat's `prompt_tokens`/`completion_tokens`, Responses' and
 * Anthropic's `input_tokens`/`output_tokens` (Anthropic counts cached input apart), the AI SDK's
 * `inputTokens`/`outputTokens`. Fields that are not whole non-negative numbers count as absent.
 */
export function reportedUsage(usage: unknown): TokenUsage | undefined {
  if (typeof usage !== 'object' || usage === null) return undefined;
  const field = (name: string): number | undefined => {
    const value = (usage as Record<string, unknown>)[name];
    return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : undefined;
  };
  const input = field('input_tokens') ?? field('inputTokens');
  const cached = (field('cache_creation_input_tokens') ?? 0) + (field('cache_read_input_tokens') ?? 0);
  const prompt = field('prompt_tokens') ?? (input === undefined ? undefined : input + cached);
  const completion = field('completion_tokens') ?? field('output_tokens') ?? field('outputTokens');
  const total = field('total_tokens') ?? field('totalTokens');
  if (prompt === undefined && completion === undefined && total === undefined) return undefined;
  // Sums of safe integers may not be one: held as `addUsage` holds them.
  return addUsage(NO_TOKENS, {
    promptTokens: prompt ?? 0,
    completionTokens: completion ?? 0,
    totalTokens: total ?? (prompt ?? 0) + (completion ?? 0),
  });
}
