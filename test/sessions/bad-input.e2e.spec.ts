import pg from 'pg';
import { connectSse } from '../support/sse-client.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';

interface BadCase {
  readonly name: string;
  /** Defaults to the assistant message's chunk route. */
  readonly path?: string;
  readonly body: unknown;
  readonly contentType?: string;
  readonly status: number;
  /** A fragment the error's field (or, without one, its message) must contain. */
  readonly names: string;
}

const MAX_BODY = 16 * 1024;
const tool = { id: 'call_1', tool: { name: 'read_file' }, arguments: { path: '/x' }, status: 'pending' };
const VALID: Record<string, Record<string, unknown>> = {
  llm_response_created: {},
  'text.start': {},
  'text.delta': { text: 'a' },
  'text.complete': { text: 'a' },
  'thinking.start': {},
  'thinking.delta': { text: 'a' },
  'thinking.complete': { text: 'a' },
  mcp_tool_streaming: { responses: [tool] },
  mcp_tool_pending: { responses: [tool] },
  mcp_tool_in_progress: { responses: [tool] },
  mcp_tool_complete: { responses: [{ ...tool, status: 'done' }] },
  llm_websearch_in_progress: {},
  llm_websearch_complete: { llm_web_search: { results: [] } },
  'image.created': {},
  'image.delta': { image: { type: 'base64', images: [] } },
  'image.complete': {},
  'video.searched': { video: {} },
  raw: { content: 1 },
  block_complete: {},
  llm_response_complete: {},
  error: { error: { name: 'E' } },
};
const REQUIRED: Record<string, string[]> = {
  'text.delta': ['text'],
  'text.complete': ['text'],
  'thinking.delta': ['text'],
  'thinking.complete': ['text'],
  mcp_tool_streaming: ['responses'],
  mcp_tool_pending: ['responses'],
  mcp_tool_in_progress: ['responses'],
  mcp_tool_complete: ['responses'],
  llm_websearch_complete: ['llm_web_search'],
  'image.delta': ['image'],
  'video.searched': ['video'],
  error: ['error'],
};
const NEXT = 4; // three chunks are recorded before the cases run

function cases(): BadCase[] {
  const list: BadCase[] = [];
  const chunk = (type: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
    seq: NEXT,
    type,
    ...VALID[type],
    ...extra,
  });
  for (const type of Object.keys(VALID)) {
    list.push({
      name: `${type} with an extra field`,
      body: [chunk(type, { bogus: true })],
      status: 400,
      names: 'chunks[0].bogus',
    });
    for (const field of Object.keys(VALID[type])) {
      if (type === 'raw') continue;
      list.push({
        name: `${type}.${field} of the wrong type`,
        body: [chunk(type, { [field]: typeof VALID[type][field] === 'string' ? 7 : 'x' })],
        status: 400,
        names: `chunks[0].${field}`,
      });
    }
    for (const field of REQUIRED[type] ?? []) {
      const rest: Record<string, unknown> = { ...chunk(type) };
      delete rest[field];
      list.push({ name: `${type} without ${field}`, body: [rest], status: 400, names: `chunks[0].${field}` });
    }
    list.push({
      name: `${type} with seq as a string`,
      body: [{ ...chunk(type), seq: String(NEXT) }],
      status: 400,
      names: 'chunks[0].seq',
    });
    if (type.startsWith('mcp_tool_')) {
      list.push({
        name: `${type} with an unknown tool status`,
        body: [chunk(type, { responses: [{ ...tool, status: 'flying' }] })],
        status: 400,
        names: 'chunks[0].responses.0.status',
      });
      list.push({
        name: `${type} with a tool without a name`,
        body: [chunk(type, { responses: [{ ...tool, tool: {} }] })],
        status: 400,
        names: 'chunks[0].responses.0.tool.name',
      });
      // Its id is part of a block's key: 7,000 characters stopped the block projection for every tenant.
      list.push({
        name: `${type} with a tool id of 201 characters`,
        body: [chunk(type, { responses: [{ ...tool, id: 'x'.repeat(201) }] })],
        status: 400,
        names: 'chunks[0].responses.0.id',
      });
      list.push({
        name: `${type} with no responses`,
        body: [chunk(type, { responses: [] })],
        status: 400,
        names: 'chunks[0].responses',
      });
    }
    // The bad chunk behind good ones: the whole batch is refused and names its index.
    list.push({
      name: `${type} broken at index 2 of a batch`,
      body: [chunk('raw'), { ...chunk('raw'), seq: NEXT + 1 }, { ...chunk(type, { bogus: 1 }), seq: NEXT + 2 }],
      status: 400,
      names: 'chunks[2]',
    });
  }
  for (const type of [
    'text',
    'TEXT.DELTA',
    'text.delta ',
    '',
    'chunk.text.delta',
    'text_delta',
    'thinking',
    'mcp_tool',
    'tool_call',
    'delta',
    'block-complete',
    'error ',
    'image',
    'video',
    'llm_response',
    'response.created',
    'text.stop',
    'thinking.end',
    'mcp_tool_done',
    'unknown',
    'Text.Start',
    'text..delta',
    'thinking.delta.extra',
    'mcp_tool_completed',
    'llm_response_done',
    'image.deltas',
    'video.search',
    'raws',
    'errors',
    'block_completed',
  ]) {
    list.push({
      name: `unknown chunk type ${JSON.stringify(type)}`,
      body: [{ seq: NEXT, type }],
      status: 400,
      names: 'chunks[0].type',
    });
  }
  for (const [label, value] of [
    ['missing', undefined],
    ['zero', 0],
    ['negative', -1],
    ['fractional', 1.5],
    ['a string', '4'],
    ['null', null],
    ['an object', {}],
    ['huge', 1e20],
  ] as const) {
    list.push({
      name: `seq ${label}`,
      body: [{ seq: value, type: 'raw', content: 1 }],
      status: 400,
      names: 'chunks[0].seq',
    });
  }
  for (const type of [7, null, ['text.start'], { t: 1 }])
    list.push({
      name: `type ${JSON.stringify(type)}`,
      body: [{ seq: NEXT, type }],
      status: 400,
      names: 'chunks[0].type',
    });
  for (const gap of [NEXT + 1, NEXT + 2, NEXT + 10, 1_000])
    list.push({
      name: `seq gap to ${gap}`,
      body: [{ seq: gap, type: 'raw', content: 1 }],
      status: 409,
      names: `expected seq ${NEXT}`,
    });
  list.push({
    name: 'seq gap inside a batch',
    body: [
      { seq: NEXT, type: 'raw', content: 1 },
      { seq: NEXT + 2, type: 'raw', content: 1 },
    ],
    status: 409,
    names: `expected seq ${NEXT + 1}`,
  });
  for (const [seq, changed] of [
    [1, { type: 'text.start' }],
    [2, { type: 'thinking.start' }],
    [3, { type: 'text.delta', text: 'Hullo' }],
    [3, { type: 'text.delta', text: 'Hello', chunk_id: 1 }],
  ] as const) {
    list.push({
      name: `seq ${seq} repeated with other content`,
      body: [{ seq, ...changed }],
      status: 409,
      names: `seq ${seq} is already recorded`,
    });
  }
  for (const body of [
    '{',
    '[{"seq":4,',
    'nul',
    '[1,]',
    '{"a":}',
    "['x']",
    '[{"seq":4 "type":"raw"}]',
    '[]]',
    'tru',
    '"unterminated',
    '[{"seq":4,"type":"raw","content":1},]',
    '\u0000',
    '[NaN]',
    '[{seq:4}]',
    '[0x10]',
  ]) {
    list.push({ name: `malformed JSON ${JSON.stringify(body)}`, body, status: 400, names: '(body)' });
  }
  const good = JSON.stringify({ seq: NEXT, type: 'raw', content: 1 });
  for (const [index, bad] of [
    '{',
    '{"seq":5,',
    'nope',
    '[',
    '{"seq": 5 "type": "raw"}',
    '}{',
    '{"a":1}}',
    'undefined',
    "{'seq':5}",
    '{"seq":5,"type":"raw","content":}',
    '{,}',
    '"',
    '{"seq":5}x',
    'NaN',
    '{"seq":5,"type":"raw" "content":1}',
  ].entries()) {
    const lines = index % 2 === 0 ? [good, bad] : [bad, good];
    list.push({
      name: `malformed NDJSON line ${JSON.stringify(bad)}`,
      body: lines.join('\n'),
      contentType: 'application/x-ndjson',
      status: 400,
      names: `line ${index % 2 === 0 ? 2 : 1}`,
    });
  }
  for (const [label, body] of [
    ['an object', { seq: NEXT, type: 'raw' }],
    ['a number', 5],
    ['a string', 'text.start'],
    ['null', null],
    ['an empty array', []],
    ['an empty NDJSON body', '\n\n'],
  ] as const) {
    list.push({
      name: `a body that is ${label}`,
      body: typeof body === 'string' && label.includes('NDJSON') ? body : JSON.stringify(body),
      contentType: label.includes('NDJSON') ? 'application/x-ndjson' : 'application/json',
      status: 400,
      names: '(body)',
    });
  }
  const big = 'x'.repeat(MAX_BODY);
  list.push({
    name: 'an oversize JSON body',
    body: [{ seq: NEXT, type: 'raw', content: big }],
    status: 413,
    names: '(body)',
  });
  list.push({
    name: 'an oversize NDJSON body',
    body: JSON.stringify({ seq: NEXT, type: 'raw', content: big }),
    contentType: 'application/x-ndjson',
    status: 413,
    names: '(body)',
  });
  list.push({
    name: 'a batch of many chunks over the limit',
    body: Array.from({ length: 2_000 }, (_, index) => ({ seq: NEXT + index, type: 'raw', content: 1 })),
    status: 413,
    names: '(body)',
  });
  list.push({
    name: 'an unsupported dialect',
    path: 'dialect',
    body: [{ seq: NEXT, type: 'raw', content: 1 }],
    status: 400,
    names: 'dialect',
  });
  list.push({
    name: 'chunks for an unknown message',
    path: 'unknown-message',
    body: [{ seq: 1, type: 'raw', content: 1 }],
    status: 404,
    names: 'message',
  });
  list.push({
    name: 'chunks for a user message',
    path: 'user-message',
    body: [{ seq: 1, type: 'raw', content: 1 }],
    status: 422,
    names: 'assistant',
  });
  list.push({
    name: 'chunks for an unknown session',
    path: 'unknown-session',
    body: [{ seq: 1, type: 'raw', content: 1 }],
    status: 404,
    names: 'session',
  });
  for (const [label, body] of [
    ['an unknown role', { role: 'robot' }],
    ['no role', {}],
    ['an extra field', { role: 'user', colour: 'red' }],
    ['a parent that does not exist', { role: 'user', parentId: 'ghost' }],
    ['a bad id', { role: 'user', id: 'has spaces' }],
    // `..` and `.` are resolved away in a URL's path: no route could name the message.
    ['an id of dots', { role: 'user', id: '..' }],
    ['content of the wrong type', { role: 'user', content: 5 }],
  ] as const) {
    list.push({
      name: `a message with ${label}`,
      path: 'messages',
      body,
      status: label.includes('parent') ? 422 : 400,
      names:
        label === 'an extra field'
          ? 'colour'
          : label.includes('parent')
            ? 'parentId'
            : label === 'a bad id' || label === 'an id of dots'
              ? 'id'
              : label === 'content of the wrong type'
                ? 'content'
                : 'role',
    });
  }
  for (const [label, body] of [
    ['a title of the wrong type', { title: 5 }],
    ['metadata that is a list', { metadata: [1] }],
    ['an extra field', { owner: 'x' }],
    ['an id of one dot', { id: '.' }],
    // The same id with the same body is a retry (200); with another, a conflict naming the first difference.
    ['an existing id', { id: 'fixed-session', title: 'another title' }],
  ] as const) {
    list.push({
      name: `a session with ${label}`,
      path: 'sessions',
      body,
      status: label === 'an existing id' ? 409 : 400,
      names:
        label === 'an extra field'
          ? 'owner'
          : label === 'an id of one dot'
            ? 'id'
            : label.includes('title') || label === 'an existing id'
              ? 'title'
              : 'metadata',
    });
  }
  list.push(...unstorableCases(chunk));
  return list;
}

/** Input no layer behind the edge should see: unstorable text, inherited names, `__proto__` keys, deep nesting. */
function unstorableCases(chunk: (type: string, extra?: Record<string, unknown>) => Record<string, unknown>): BadCase[] {
  const list: BadCase[] = [];
  const refused = (name: string, body: unknown, names: string, more: Partial<BadCase> = {}) => {
    list.push({ name, body, status: 400, names, ...more });
  };
  const ndjson = { contentType: 'application/x-ndjson' };
  const json = { contentType: 'application/json' };
  // Text PostgreSQL (or a peer) cannot store, in any string or key, is refused naming where it is.
  const texts = {
    'a NUL': 'a\u0000b',
    'a lone high surrogate': 'a\ud800',
    'a lone low surrogate': '\udc00b',
    'a reversed pair': '\udc00\ud800',
  };
  for (const [label, bad] of Object.entries(texts)) {
    const text = chunk('text.delta', { text: bad });
    const raw = (content: unknown) => chunk('raw', { content });
    const pending = (call: Record<string, unknown>) => chunk('mcp_tool_pending', { responses: [{ ...tool, ...call }] });
    const [sessions, messages, fork] = [{ path: 'sessions' }, { path: 'messages' }, { path: 'fork' }];
    refused(`text.delta text with ${label}`, [text], 'chunks[0].text');
    refused(`raw content with ${label} deep inside`, [raw({ a: [1, { b: bad }] })], 'chunks[0].content.a.1.b');
    refused(`raw content with ${label} in a key`, [raw({ a: { [`k${bad}`]: 1 } })], 'chunks[0].content.a');
    refused(`a tool argument with ${label}`, [pending({ arguments: { p: bad } })], 'chunks[0].responses.0.arguments.p');
    refused(`a tool name with ${label}`, [pending({ tool: { name: bad } })], 'chunks[0].responses.0.tool.name');
    const batch = [raw(1), { ...raw(1), seq: NEXT + 1 }, { ...text, seq: NEXT + 2 }];
    refused(`the third chunk of a batch with ${label}`, batch, 'chunks[2].text');
    refused(`an NDJSON line with ${label}`, JSON.stringify(text), 'chunks[0].text', ndjson);
    refused(`a session title with ${label}`, { title: bad }, 'title', sessions);
    refused(`session metadata with ${label}`, { metadata: { foo: { b: [bad] } } }, 'metadata.foo.b.0', sessions);
    refused(`a session metadata key with ${label}`, { metadata: { [bad]: 1 } }, 'metadata', sessions);
    refused(`a message content with ${label}`, { role: 'user', content: bad }, 'content', messages);
    refused(`a message model with ${label}`, { role: 'assistant', model: bad }, 'model', messages);
    refused(`a fork title with ${label}`, { atPosition: 1, title: bad }, 'title', fork);
    refused(`a fork metadata value with ${label}`, { atPosition: 1, metadata: { foo: bad } }, 'metadata.foo', fork);
    refused(`a decision comment with ${label}`, { argumentsSha256: '0'.repeat(64), comment: bad }, 'comment', {
      path: 'decision',
    });
  }
  // Names that every plain object inherits are not chunk types.
  for (const type of ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf', 'isPrototypeOf']) {
    refused(`chunk type ${type}`, [{ seq: NEXT, type }], 'chunks[0].type');
    refused(`chunk type ${type} in an NDJSON line`, JSON.stringify({ seq: NEXT, type }), 'chunks[0].type', ndjson);
    refused(`message role ${type}`, { role: type }, 'role', { path: 'messages' });
  }
  // A `__proto__` key would be dropped by schema parsing (or reach a prototype): refused wherever it is.
  const protoKey = '"__proto__":{"polluted":true}';
  const [sessions, messages, fork] = ['sessions', 'messages', 'fork'].map((path) => ({ ...json, path }));
  const rawChunk = `{"seq":${NEXT},"type":"raw","content":{"a":{${protoKey}}}}`;
  const call = `{"id":"c","tool":{"name":"t",${protoKey}},"status":"pending"}`;
  const toolChunk = `{"seq":${NEXT},"type":"mcp_tool_pending","responses":[${call}]}`;
  refused('raw content with a __proto__ key', `[${rawChunk}]`, 'chunks[0].content.a', json);
  refused('a tool with a __proto__ key', `[${toolChunk}]`, 'chunks[0].responses.0.tool', json);
  refused('session metadata with a __proto__ key', `{"metadata":{${protoKey}}}`, 'metadata', sessions);
  refused('a session body with a __proto__ key', `{${protoKey}}`, '__proto__', sessions);
  refused('a message body with a __proto__ key', `{"role":"user",${protoKey}}`, '__proto__', messages);
  // JSON nested 5,000 deep fits the body limit; it is refused naming the field that holds it. Written as
  // text: building it as an object would overflow the test's own stack.
  const deep = `${'['.repeat(5_000)}${']'.repeat(5_000)}`;
  const deepChunk = (type: string, field: string) => `{"seq":${NEXT},"type":"${type}",${field}}`;
  const deepTool = `"responses":[{"id":"c","tool":{"name":"t"},"status":"pending","arguments":${deep}}]`;
  refused('raw content nested 5,000 deep', `[${deepChunk('raw', `"content":${deep}`)}]`, 'chunks[0].content', json);
  refused('tool arguments 5,000 deep', `[${deepChunk('mcp_tool_pending', deepTool)}]`, 'chunks[0].responses', json);
  refused('an NDJSON line nested 5,000 deep', deepChunk('raw', `"content":${deep}`), 'chunks[0].content', ndjson);
  refused('a chunk body nested 5,000 deep', deep, 'chunks[0]', json);
  refused('session metadata nested 5,000 deep', `{"metadata":{"foo":${deep}}}`, 'metadata', sessions);
  refused('session title nested 5,000 deep', `{"title":${deep}}`, 'title', sessions);
  refused('fork metadata nested 5,000 deep', `{"atPosition":1,"metadata":{"foo":${deep}}}`, 'metadata', fork);
  return list;
}

describe('bad input over HTTP', () => {
  let ledger: LedgerUnderTest;
  let database: pg.Client;
  let sessionId: string;
  let messageId: string;
  let userMessageId: string;

  beforeAll(async () => {
    ledger = await startLedger({ LEDGER_MAX_BODY_BYTES: String(MAX_BODY) });
    database = new pg.Client({ connectionString: ledger.database.connectionString });
    await database.connect();
    await ledger.request('POST', '/v1/sessions', { id: 'fixed-session' });
    sessionId = (await ledger.request('POST', '/v1/sessions', {})).body.id;
    userMessageId = (
      await ledger.request('POST', `/v1/sessions/${sessionId}/messages`, { role: 'user', content: 'hi' })
    ).body.id;
    messageId = (await ledger.request('POST', `/v1/sessions/${sessionId}/messages`, { role: 'assistant' })).body.id;
    const seeded = await ledger.request('POST', `/v1/sessions/${sessionId}/messages/${messageId}/chunks`, [
      { seq: 1, type: 'llm_response_created' },
      { seq: 2, type: 'text.start' },
      { seq: 3, type: 'text.delta', text: 'Hello' },
    ]);
    expect(seeded.status).toBe(200);
  });
  afterAll(async () => {
    await database.end();
    await ledger.close();
  });

  const generated = cases();
  it('generates at least 200 cases', () => expect(generated.length).toBeGreaterThanOrEqual(200));

  it('one poisoned post among 40 concurrent innocent ones: it alone is refused, naming its field', async () => {
    const shared = (await ledger.request('POST', '/v1/sessions', {})).body.id as string;
    const messages = `/v1/sessions/${shared}/messages`;
    // Half share the poisoner's session (one queue, one append), half open sessions of their own (one group commit).
    const innocents = Array.from({ length: 40 }, (_, index) =>
      index % 2 === 0
        ? { path: messages, body: { role: 'user', content: `innocent ${index}` } }
        : { path: '/v1/sessions', body: {} },
    );
    const posts = innocents.map(
      ({ path, body }) =>
        () =>
          ledger.request('POST', path, body),
    );
    posts.splice(20, 0, () => ledger.request('POST', messages, { role: 'user', content: 'poison \u0000' }));
    const responses = await Promise.all(posts.map((post) => post()));

    const [poisoned] = responses.splice(20, 1);
    expect(poisoned.status).toBe(400);
    expect(poisoned.body.error.field).toBe('content');
    expect(responses.map((response) => response.status)).toEqual(innocents.map(() => 201));
    type Event = { type: string; data: { content?: string } };
    const events: Event[] = (await ledger.request('GET', `/v1/sessions/${shared}/events`)).body.events;
    const stored = events.filter((event) => event.type === 'message.created').map((event) => event.data.content);
    const sent = innocents.map(({ body }) => (body as { content?: string }).content).filter((content) => content);
    expect(stored.sort()).toEqual(sent.sort());
  });

  it.each(generated)('$name → $status naming the problem, and the log is unchanged', async (badCase) => {
    const head = async () =>
      (await database.query<{ position: string }>('SELECT position FROM event_log_head')).rows[0].position;
    const before = await head();
    const chunkPath = (message: string, session = sessionId) => `/v1/sessions/${session}/messages/${message}/chunks`;
    const path = {
      undefined: chunkPath(messageId),
      dialect: `${chunkPath(messageId)}?dialect=openai`,
      'unknown-message': chunkPath('no-such-message'),
      'user-message': chunkPath(userMessageId),
      'unknown-session': chunkPath(messageId, 'no-such-session'),
      messages: `/v1/sessions/${sessionId}/messages`,
      sessions: '/v1/sessions',
      fork: `/v1/sessions/${sessionId}/fork`,
      decision: '/v1/tool-calls/no-such-call/approve',
    }[String(badCase.path) as 'undefined'];
    const response = await ledger.request('POST', path, badCase.body, badCase.contentType);
    expect(response.status).toBe(badCase.status);
    expect(typeof response.body.error.code).toBe('string');
    expect(`${response.body.error.field ?? ''} ${response.body.error.message}`).toContain(badCase.names);
    expect(await head()).toBe(before);
  });
});

describe('client ids named like Object.prototype members', () => {
  let ledger: LedgerUnderTest;
  beforeAll(async () => {
    ledger = await startLedger();
  });
  afterAll(() => ledger.close());

  const ids = ['constructor', 'toString', '__proto__', 'hasOwnProperty', 'valueOf'];
  it.each(ids)('a tool call id %s is an ordinary id', async (toolId) => {
    const sessionId = (await ledger.request('POST', '/v1/sessions', {})).body.id as string;
    const message = `/v1/sessions/${sessionId}/messages`;
    const messageId = (await ledger.request('POST', message, { role: 'assistant' })).body.id as string;
    const chunks = `${message}/${messageId}/chunks`;
    const call = (status: string) => ({ id: toolId, tool: { name: 'read_file' }, arguments: { path: '/x' }, status });
    // Rule 10: a completion for a tool id never announced changes nothing.
    const completion = { seq: 1, type: 'mcp_tool_complete', responses: [call('done')] };
    const unannounced = await ledger.request('POST', chunks, [completion]);
    expect(unannounced.status).toBe(200);
    const unchanged = await ledger.request('GET', `${message}/${messageId}?minPosition=${unannounced.body.position}`);
    expect(unchanged.body.blocks).toEqual([]);
    // Announced, then completed: one tool block, finished.
    const announced = await ledger.request('POST', chunks, [
      { seq: 2, type: 'mcp_tool_pending', responses: [call('pending')] },
      { seq: 3, type: 'mcp_tool_complete', responses: [{ ...call('done'), response: { ok: true } }] },
    ]);
    expect(announced.status).toBe(200);
    const read = await ledger.request('GET', `${message}/${messageId}?minPosition=${announced.body.position}`);
    const blocks = read.body.blocks;
    expect(blocks).toMatchObject([{ type: 'tool', toolId, status: 'success', content: { ok: true } }]);
  });

  // The ledger stores a tool result it cannot store as is in this shape. Read back as its own, a producer's object of
  // the same shape failed every read of the session with a 500 (its JSON bad), crashed the process as a live feed
  // wrote it (nested 4,000 deep), and delivered a NUL the edge refuses.
  it('a tool result shaped like the ledger’s encoded one is data, read back and sent live as it was sent', async () => {
    const sessionId = (await ledger.request('POST', '/v1/sessions', {})).body.id as string;
    const message = `/v1/sessions/${sessionId}/messages`;
    const messageId = (await ledger.request('POST', message, { role: 'assistant' })).body.id as string;
    const shaped = [
      { $encoding: 'json', json: '{bad' },
      { $encoding: 'json', json: '"a\\u0000b"' },
      { $encoding: 'json', json: `${'['.repeat(4_000)}"\\u0000"${']'.repeat(4_000)}` },
    ];
    const watcher = connectSse(`${ledger.baseUrl}/v1/sessions/${sessionId}/live`);
    expect((await watcher.opened).status).toBe(200);
    try {
      const call = (status: string) => ({ id: 'call_1', tool: { name: 'read_file' }, arguments: { shaped }, status });
      const posted = await ledger.request('POST', `${message}/${messageId}/chunks`, [
        { seq: 1, type: 'mcp_tool_pending', responses: [call('pending')] },
        { seq: 2, type: 'mcp_tool_complete', responses: [{ ...call('done'), response: shaped[2] }] },
      ]);
      expect(posted.status).toBe(200);
      for (const route of [
        `/v1/sessions/${sessionId}`,
        `${message}/${messageId}`,
        `/v1/sessions/${sessionId}/history`,
      ]) {
        const read = await ledger.request('GET', `${route}?minPosition=${posted.body.position}`);
        expect(read.status).toBe(200);
      }
      const read = await ledger.request('GET', `${message}/${messageId}`);
      expect(read.body.blocks).toMatchObject([{ type: 'tool', status: 'success', content: shaped[2] }]);
      expect(read.body.blocks[0].metadata.rawMcpToolResponse.arguments).toEqual({ shaped });
      // The feed sent the block as read, and the service still answers.
      const deadline = Date.now() + 10_000;
      const sentLive = () => watcher.events.find((event) => event.event === 'block' && event.data.status === 'success');
      while (!sentLive() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(sentLive()?.data.content).toEqual(shaped[2]);
      expect((await ledger.request('GET', `/v1/sessions/${sessionId}`)).status).toBe(200);
    } finally {
      watcher.close();
    }
  });
});
