import { CHUNK_TYPES, ChunkValidationError, parseChunk, parseChunks } from './chunk-schemas.js';

const tool = { id: 'call_1', tool: { name: 'read_file', serverId: 's' }, arguments: { path: '/x' }, status: 'pending' };

/** A valid chunk of every type, so each can be broken in every way below. */
const VALID: Record<string, Record<string, unknown>> = {
  llm_response_created: {},
  'text.start': {},
  'text.delta': { text: 'a' },
  'text.complete': { text: 'a' },
  'thinking.start': {},
  'thinking.delta': { text: 'a', thinking_millsec: 3 },
  'thinking.complete': { text: 'a' },
  mcp_tool_streaming: { responses: [{ ...tool, status: 'streaming', partialArguments: '{' }] },
  mcp_tool_pending: { responses: [tool] },
  mcp_tool_in_progress: { responses: [{ ...tool, status: 'invoking' }] },
  mcp_tool_complete: { responses: [{ ...tool, status: 'done', response: { content: [], isError: false } }] },
  llm_websearch_in_progress: {},
  llm_websearch_complete: { llm_web_search: { source: 'openai', results: [] } },
  'image.created': {},
  'image.delta': { image: { type: 'base64', images: ['data:'] } },
  'image.complete': {},
  'video.searched': { video: { type: 'url', content: 'https://v' } },
  'translation.delta': { text: 'Bonjour' },
  'translation.complete': { text: 'Bonjour.' },
  raw: { content: { anything: true } },
  block_complete: { response: { text: 'a' } },
  llm_response_complete: {},
  error: { error: { name: 'AbortError', message: 'stop' } },
};

function refusal(value: unknown, index = 3): ChunkValidationError {
  try {
    parseChunk(value, index);
  } catch (error) {
    expect(error).toBeInstanceOf(ChunkValidationError);
    return error as ChunkValidationError;
  }
  throw new Error(`accepted ${JSON.stringify(value)}`);
}

describe('chunk validation', () => {
  it('knows every Cherry Studio chunk type and accepts a valid chunk of each', () => {
    expect(Object.keys(VALID).sort()).toEqual([...CHUNK_TYPES].sort());
    for (const [type, payload] of Object.entries(VALID))
      expect(parseChunk({ seq: 1, type, ...payload }, 0)).toMatchObject({ seq: 1, type });
  });

  it('names the index and the field of an unknown type, a missing seq, a bad seq', () => {
    expect(refusal({ seq: 1, type: 'text.deltaa', text: 'x' })).toMatchObject({ index: 3, field: 'type' });
    expect(refusal({ type: 'text.start' })).toMatchObject({ field: 'seq' });
    expect(refusal({ seq: 0, type: 'text.start' })).toMatchObject({ field: 'seq' });
    expect(refusal({ seq: 1.5, type: 'text.start' })).toMatchObject({ field: 'seq' });
    expect(refusal({ seq: '1', type: 'text.start' })).toMatchObject({ field: 'seq' });
    expect(refusal([1, 2])).toMatchObject({ field: '(chunk)' });
    expect(refusal('text')).toMatchObject({ field: '(chunk)' });
    expect(refusal(null).message).toBe('chunks[3].(chunk): must be a JSON object');
  });

  // Generated: for every chunk type an extra field, and for every typed payload field a value of
  // another type (`raw.content` is any JSON by definition).
  const cases = Object.entries(VALID).flatMap(([type, payload]) => [
    { name: `${type}: extra field`, value: { seq: 1, type, ...payload, surprise: 1 }, field: 'surprise' },
    ...Object.keys(payload)
      .filter((key) => !(type === 'raw' && key === 'content'))
      .map((key) => ({
        name: `${type}: ${key} of the wrong type`,
        value: { seq: 1, type, ...payload, [key]: typeof payload[key] === 'string' ? 12345 : 'not this type' },
        field: key,
      })),
  ]);
  it.each(cases)('$name is refused, naming the field', ({ value, field }) => {
    expect(refusal(value).field.split('.')[0]).toBe(field);
  });

  it('names nested fields of tool responses', () => {
    expect(refusal({ seq: 1, type: 'mcp_tool_pending', responses: [{ ...tool, status: 'flying' }] }).field).toBe(
      'responses.0.status',
    );
    expect(refusal({ seq: 1, type: 'mcp_tool_pending', responses: [{ ...tool, tool: {} }] }).field).toBe(
      'responses.0.tool.name',
    );
    expect(refusal({ seq: 1, type: 'mcp_tool_pending', responses: [] }).field).toBe('responses');
  });

  it('refuses a whole batch at its first bad chunk', () => {
    expect(() =>
      parseChunks([
        { seq: 1, type: 'text.start' },
        { seq: 2, type: 'text.delta' },
      ]),
    ).toThrow('chunks[1].text');
  });
});
