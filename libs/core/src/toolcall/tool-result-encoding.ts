/**
 * An MCP result as the log and the read models store it. JSON columns (PostgreSQL jsonb) refuse
 * NUL and unpaired UTF-16 surrogates, which a tool's output may hold (a file read as text, an
 * echo of bytes). Such a result is stored as its own JSON text, `{ $encoding: 'json', json }`:
 * JSON escapes those characters (`\u0000`, `\ud800`), so the text is storable and parses back
 * to the identical value. Every other result is stored as it is. A result that holds an object
 * shaped like the wrapper anywhere is wrapped too, so reading back is never ambiguous.
 */
export const TOOL_RESULT_ENCODING_KEY = '$encoding';

export interface EncodedToolResult {
  readonly [TOOL_RESULT_ENCODING_KEY]: 'json';
  readonly json: string;
}

/** NUL, a high surrogate not followed by a low one, or a low surrogate not preceded by a high one. */
// eslint-disable-next-line no-control-regex -- NUL is exactly what PostgreSQL cannot store
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

export function encodeToolResult(result: unknown): unknown {
  if (!needsEncoding(result)) return result;
  return { [TOOL_RESULT_ENCODING_KEY]: 'json', json: JSON.stringify(result) } satisfies EncodedToolResult;
}

/**
 * One result the saga stored, read back as it came. Only the saga's own places are read this way (`decodedExecution`,
 * `decodedGovernance`, `decodedBlock`): a producer may send an object of the wrapper's shape anywhere, and it is data,
 * shown as sent (read back, one of bad JSON failed every read of its session with a 500, a deep one crashed the
 * process as a live feed wrote it, and one of `"a\u0000b"` delivered what the edge refuses).
 */
export function decodeToolResult(result: unknown): unknown {
  if (!isEncoded(result)) return result;
  // Stored by the saga, it parses; a row edited in the database is shown as it is.
  const decoded = parsedOrUndefined(result.json);
  return decoded === undefined ? result : decoded;
}

/** A call's execution record with its result read back. */
export function decodedExecution<T>(execution: T): T {
  const record = execution as { readonly result?: unknown } | null | undefined;
  if (typeof record !== 'object' || record === null || record.result === undefined) return execution;
  return { ...record, result: decodeToolResult(record.result) } as T;
}

/** A call's governance record (`governanceRecord`, a governed block's `metadata.governance`) with its result read back. */
export function decodedGovernance<T>(governance: T): T {
  const record = governance as { readonly execution?: unknown } | null | undefined;
  if (typeof record !== 'object' || record === null || !record.execution) return governance;
  return { ...record, execution: decodedExecution(record.execution) } as T;
}

/**
 * A block with the saga's result read back where the saga put it: a governed tool block's content, its raw response's
 * result and its governance record. The block's arguments, and every other block, are the producer's.
 */
export function decodedBlock<T extends { readonly content?: unknown; readonly metadata?: unknown }>(block: T): T {
  const metadata = block.metadata as { governance?: { execution?: unknown }; rawMcpToolResponse?: unknown } | undefined;
  if (!metadata?.governance) return block;
  const raw = metadata.rawMcpToolResponse as { response?: unknown } | undefined;
  return {
    ...block,
    ...('content' in block ? { content: decodeToolResult(block.content) } : {}),
    metadata: {
      ...metadata,
      ...(raw && 'response' in raw ? { rawMcpToolResponse: { ...raw, response: decodeToolResult(raw.response) } } : {}),
      governance: decodedGovernance(metadata.governance),
    },
  };
}

function parsedOrUndefined(json: string): unknown {
  try {
    return JSON.parse(json);
  } catch {
    return undefined;
  }
}

function needsEncoding(value: unknown): boolean {
  if (typeof value === 'string') return UNSTORABLE.test(value);
  if (Array.isArray(value)) return value.some(needsEncoding);
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value);
    return isEncoded(value) || entries.some(([key, member]) => UNSTORABLE.test(key) || needsEncoding(member));
  }
  return false;
}

function isEncoded(value: unknown): value is EncodedToolResult {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const { [TOOL_RESULT_ENCODING_KEY]: encoding, json } = value as Record<string, unknown>;
  return Object.keys(value).length === 2 && encoding === 'json' && typeof json === 'string';
}
