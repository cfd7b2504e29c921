import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { MessageBlock } from '../blocks/message-block.js';

/** A block vector (shared/vectors/README.md): one assistant response and the blocks it must produce. */
export interface BlockVector {
  readonly file: string;
  readonly description: string;
  readonly chunks: readonly Record<string, unknown>[];
  readonly expected: { readonly blocks: readonly Record<string, unknown>[]; readonly messageStatus: string };
}

const folder = path.join(path.dirname(fileURLToPath(import.meta.url)), 'vectors');

/** The shared vectors (copied from shared/vectors) and our own, 10 and up. */
export function loadBlockVectors(): BlockVector[] {
  return readdirSync(folder)
    .filter((file) => file.endsWith('.json'))
    .sort()
    .map((file) => ({
      file,
      ...(JSON.parse(readFileSync(path.join(folder, file), 'utf8')) as Omit<BlockVector, 'file'>),
    }));
}

/** The chunks numbered 1, 2, 3 … as posted. */
export function numberedChunks(vector: BlockVector): Record<string, unknown>[] {
  return vector.chunks.map((chunk, index) => ({ seq: index + 1, ...chunk }));
}

/**
 * Compares blocks as the vectors specify: only the fields a vector lists, with `"@blocks[i]"`
 * standing for the id of block i. Returns [actual, expected] views for `toEqual`.
 */
export function compareBlocks(
  blocks: readonly MessageBlock[],
  expected: readonly Record<string, unknown>[],
): [unknown[], unknown[]] {
  const resolve = (value: unknown): unknown => {
    if (typeof value === 'string' && value.startsWith('@blocks[')) return blocks[Number(value.slice(8, -1))]?.id;
    if (Array.isArray(value)) return value.map(resolve);
    if (value !== null && typeof value === 'object')
      return Object.fromEntries(Object.entries(value).map(([key, field]) => [key, resolve(field)]));
    return value;
  };
  const actual = blocks.map((block, index) => {
    const wanted = expected[index] ?? { type: undefined, status: undefined };
    const fields: Record<string, unknown> = {
      type: block.type,
      status: block.status,
      content: block.content,
      toolName: block.toolName,
      toolId: block.toolId,
      arguments: block.arguments,
      response: block.type === 'tool' ? block.content : block.response,
      rawStatus: (block.metadata?.rawMcpToolResponse as { status?: string } | undefined)?.status,
      url: block.url,
      images: (block.metadata?.generateImageResponse as { images?: string[] } | undefined)?.images,
      // `null` in a vector: the block cites nothing (the field is absent).
      citationReferences: block.citationReferences ?? null,
      targetLanguage: block.targetLanguage,
      sourceLanguage: block.sourceLanguage,
      sourceBlockId: block.sourceBlockId,
      signature: block.metadata?.signature,
      reasoningItem: block.metadata?.reasoningItem,
      error:
        block.error &&
        Object.fromEntries(
          Object.keys((wanted.error as object | undefined) ?? {}).map((key) => [key, block.error![key]]),
        ),
    };
    return Object.fromEntries(Object.keys(wanted).map((key) => [key, fields[key]]));
  });
  const wanted = expected.map(resolve);
  return [actual, wanted];
}
