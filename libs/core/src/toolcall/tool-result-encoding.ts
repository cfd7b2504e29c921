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
 * The value with every stored result in it read back as it came (blocks, records, views). Producers' data is walked
 * too, and a producer may send an object of the wrapper's shape: only what `encodeToolResult` would have made is read
 * back, a JSON text of a value that needed encoding; anything else is data, shown as it was sent (a wrapper of bad
 * JSON failed every read of its session, and every live feed of the instance while one was watched).
 */
export function decodeToolResults<T>(value: T): T {
  if (isEncoded(value)) {
    const decoded = parsedOrUndefined(value.json);
    return (decoded !== undefined && needsEncoding(decoded) ? decoded : value) as T;
  }
  if (Array.isArray(value)) return value.map(decodeToolResults) as T;
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([key, member]) => [key, decodeToolResults(member)])) as T;
  }
  return value;
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
