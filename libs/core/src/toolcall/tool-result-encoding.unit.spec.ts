import {
  decodedBlock,
  decodedExecution,
  decodeToolResult,
  encodeToolResult,
  TOOL_RESULT_ENCODING_KEY,
} from './tool-result-encoding.js';

/** What a JSON column (PostgreSQL jsonb) can hold: strings and keys without NUL, surrogates only in pairs. */
const wellFormed = (text: string) =>
  !text.includes('\u0000') && (text as string & { isWellFormed(): boolean }).isWellFormed();
const storable = (value: unknown): boolean => {
  if (typeof value === 'string') return wellFormed(value);
  if (Array.isArray(value)) return value.every(storable);
  if (value === null || typeof value !== 'object') return true;
  return Object.entries(value).every(([key, member]) => wellFormed(key) && storable(member));
};

describe('tool results are stored as they came', () => {
  const text = (value: string) => ({ content: [{ type: 'text', text: value }], isError: false });
  const cases: Record<string, unknown> = {
    'NUL bytes': text('a\u0000b\u0000'),
    'a lone high surrogate': text('x\ud800y'),
    'a lone low surrogate': text('\udc00'),
    'a reversed pair': text('\udc00\ud800'),
    'an unpaired key': { content: [], isError: false, structuredContent: { 'k\u0000\ud800': 1 } },
    'binary read as text': text(Buffer.from(Array.from({ length: 256 }, (_, byte) => byte)).toString('latin1')),
  };

  it.each(Object.entries(cases))('%s: encoded, its encoding named, storable, read back identical', (_, result) => {
    const stored = encodeToolResult(result);
    expect(stored).toEqual({ [TOOL_RESULT_ENCODING_KEY]: 'json', json: expect.any(String) });
    expect(storable(stored)).toBe(true);
    expect(decodeToolResult(JSON.parse(JSON.stringify(stored)))).toEqual(result);
  });

  it('a storable result is kept as it is, well-formed pairs (emoji) included', () => {
    const result = text('plain 😀 text');
    expect(encodeToolResult(result)).toBe(result);
  });

  it('a result that itself looks like an encoded one is encoded too, so decoding is never ambiguous', () => {
    const wrapperShaped = { [TOOL_RESULT_ENCODING_KEY]: 'json', json: '1' };
    const lookalike = { content: [{ type: 'text', text: 'x', nested: wrapperShaped }], isError: false };
    const stored = encodeToolResult(lookalike);
    expect(stored).not.toBe(lookalike);
    expect(decodeToolResult(stored)).toEqual(lookalike);
  });

  it('reads the saga’s results back where the saga put them: a governed block’s content, raw result and record', () => {
    const result = text('a\u0000b');
    const stored = encodeToolResult(result);
    const governedBlock = (value: unknown) => ({
      id: 'b1',
      arguments: { path: '/x' },
      content: value,
      metadata: { rawMcpToolResponse: { response: value }, governance: { execution: { result: value } } },
    });
    expect(decodedBlock(governedBlock(stored))).toEqual(governedBlock(result));
    expect(decodedExecution({ startedAt: 't', result: stored })).toEqual({ startedAt: 't', result });
    expect(decodedExecution(null)).toBeNull();
  });

  // Read back, one of bad JSON failed every read of its session, a deep one crashed the process as a live feed wrote
  // it, and one of "a\u0000b" delivered what the edge refuses.
  it('reads a producer’s object of the wrapper’s shape anywhere else as the data it is', () => {
    const sent = [
      { [TOOL_RESULT_ENCODING_KEY]: 'json', json: '{bad' },
      { [TOOL_RESULT_ENCODING_KEY]: 'json', json: '"a\\u0000b"' },
      { [TOOL_RESULT_ENCODING_KEY]: 'json', json: `${'['.repeat(5_000)}${']'.repeat(5_000)}` },
    ];
    const producersBlock = {
      id: 'b2',
      arguments: { sent },
      content: sent[1],
      metadata: { rawMcpToolResponse: sent[2] },
    };
    expect(decodedBlock(producersBlock)).toBe(producersBlock);
    // A governed block's arguments are the producer's too.
    const governed = { id: 'b3', arguments: { sent }, metadata: { governance: { execution: null } } };
    expect(decodedBlock(governed).arguments).toEqual({ sent });
    expect(decodeToolResult(sent[0])).toEqual(sent[0]);
  });
});
