import { decodeToolResults, encodeToolResult, TOOL_RESULT_ENCODING_KEY } from './tool-result-encoding.js';

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
    expect(decodeToolResults(JSON.parse(JSON.stringify(stored)))).toEqual(result);
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
    expect(decodeToolResults(stored)).toEqual(lookalike);
  });

  it('decodes encoded results wherever they sit in a block or a record', () => {
    const result = text('a\u0000b');
    const stored = encodeToolResult(result);
    const blockHolding = (value: unknown) => ({
      id: 'b1',
      content: value,
      metadata: { rawMcpToolResponse: { response: value }, governance: { execution: { result: value } } },
    });
    expect(decodeToolResults(blockHolding(stored))).toEqual(blockHolding(result));
  });

  it('reads a producer’s object of the wrapper’s shape as the data it is, never throwing on it', () => {
    const sent = [
      { [TOOL_RESULT_ENCODING_KEY]: 'json', json: '{bad' },
      { [TOOL_RESULT_ENCODING_KEY]: 'json', json: '"x"' },
      { [TOOL_RESULT_ENCODING_KEY]: 'json', json: '{"content":[],"isError":false}' },
    ];
    for (const value of sent)
      expect(decodeToolResults({ arguments: { nested: [value] } })).toEqual({ arguments: { nested: [value] } });
    // What the saga stored is still read back, beside them.
    const stored = encodeToolResult(text('a\u0000b'));
    expect(decodeToolResults({ producer: sent[1], saga: stored })).toEqual({
      producer: sent[1],
      saga: text('a\u0000b'),
    });
  });
});
