import { Guardian } from '../../apps/ledger/src/governance/guardian.js';
import {
  startChatCompletionsServer,
  type ChatCompletionsServer,
  type ChatRequest,
  type ScriptedReply,
} from '../support/chat-completions-server.js';

describe('guardian', () => {
  let server: ChatCompletionsServer;
  let next: (request: ChatRequest) => ScriptedReply = () => ({ content: '{"risk":"low","rationale":"reads a file"}' });
  beforeAll(async () => {
    server = await startChatCompletionsServer((request) => next(request));
  });
  afterAll(async () => {
    await server?.close();
  });
  const guardian = (mode: 'off' | 'monitor' | 'enforce' = 'enforce', timeoutMs = 2_000) =>
    new Guardian({ mode, timeoutMs, endpoint: { baseUrl: server.baseUrl, apiKey: server.apiKey, model: 'guard-1' } });
  const tool = { server: 'fs', name: 'write_file' };
  const call = (args: unknown, policyVersion = 'v1', tenant = 'acme') => ({
    tenant,
    tool,
    arguments: args,
    policyVersion,
  });

  it('asks the model with structured output and caches the verdict by tool, canonical arguments and policy version', async () => {
    next = () => ({ content: '{"risk":"high","rationale":"overwrites a file"}' });
    const reviewer = guardian();
    const before = server.requests.length;
    expect(await reviewer.review(call({ path: 'a', content: 'x' }))).toEqual({
      risk: 'high',
      rationale: 'overwrites a file',
      reviewer: 'llm:guard-1',
      cacheHit: false,
      mode: 'enforce',
      failed: false,
    });
    const request = server.requests.at(-1)!;
    expect(request).toMatchObject({ model: 'guard-1', response_format: { type: 'json_schema' } });
    expect(request.messages[1].content).toBe('{"arguments":{"content":"x","path":"a"},"tool":"fs/write_file"}');
    expect(await reviewer.review(call({ content: 'x', path: 'a' }))).toMatchObject({
      risk: 'high',
      cacheHit: true,
    });
    expect(server.requests.length).toBe(before + 1);
    expect(await reviewer.review(call({ content: 'x', path: 'a' }, 'v2'))).toMatchObject({ cacheHit: false });
    expect(server.requests.length).toBe(before + 2);
  });

  it("never answers one tenant from another tenant's verdict: a hit would confirm what that tenant's agent asked", async () => {
    next = () => ({ content: '{"risk":"medium","rationale":"acme bids on Initech"}' });
    const reviewer = guardian();
    const before = server.requests.length;
    await reviewer.review(call({ message: 'acquire Initech, bid 42' }, 'v1', 'acme'));
    next = () => ({ content: '{"risk":"low","rationale":"echo"}' });
    const guess = await reviewer.review(call({ message: 'acquire Initech, bid 42' }, 'v1', 'globex'));
    expect(guess).toMatchObject({ cacheHit: false, rationale: 'echo' });
    expect(server.requests.length).toBe(before + 2);
    // The rules keep nothing: no review of theirs claims a hit, for the same tenant either.
    const rules = new Guardian({ mode: 'enforce', timeoutMs: 1_000 });
    rules.reviewAtOnce(call({ path: 'x' }, 'v1', 'acme'));
    expect(rules.reviewAtOnce(call({ path: 'x' }, 'v1', 'globex'))).toMatchObject({ cacheHit: false });
    expect(rules.reviewAtOnce(call({ path: 'x' }, 'v1', 'acme'))).toMatchObject({ cacheHit: false });
  });

  it("keeps each tenant's verdicts apart: one tenant's many calls never push out another's", async () => {
    next = () => ({ content: '{"risk":"low","rationale":"reads a file"}' });
    const reviewer = new Guardian({
      mode: 'enforce',
      timeoutMs: 2_000,
      endpoint: { baseUrl: server.baseUrl, apiKey: server.apiKey, model: 'guard-1' },
      cachedVerdictsPerTenant: 2,
    });
    await reviewer.review(call({ path: 'kept' }, 'v1', 'globex'));
    for (const path of ['a', 'b', 'c']) await reviewer.review(call({ path }, 'v1', 'acme'));
    expect(reviewer.reviewAtOnce(call({ path: 'kept' }, 'v1', 'globex'))).toMatchObject({ cacheHit: true });
    expect(
      ['a', 'b', 'c'].map((path) => reviewer.reviewAtOnce(call({ path }, 'v1', 'acme'))?.cacheHit ?? 'asks the model'),
    ).toEqual(['asks the model', true, true]);
  });

  it.each<[string, ScriptedReply, RegExp]>([
    ['not JSON', { content: 'looks fine to me' }, /did not answer with JSON/],
    ['JSON of another shape', { content: '{"risk":"catastrophic","rationale":"x"}' }, /verdict schema \(risk\)/],
    ['a body that is not a completion', { malformedBody: '{"nope":true}' }, /no answer/],
    ['a server error', { status: 500, message: 'boom' }, /^the reviewer answered HTTP 500$/],
    ['no answer in time', { content: '{"risk":"low","rationale":"late"}', delayMs: 1_500 }, /no answer within 300 ms/],
  ])('records a failure, never a verdict, for %s', async (_case, reply, rationale) => {
    next = () => reply;
    const review = await guardian('enforce', 300).review(call({ path: 'b' }));
    expect(review).toMatchObject({ failed: true, reviewer: 'llm:guard-1' });
    expect(review.rationale).toMatch(rationale);
  });

  // The rationale is recorded in the log and shown to every reader of the session: the endpoint's words are not.
  it('records a refused key by its status alone, though the endpoint quotes the key', async () => {
    next = () => ({ status: 401, message: `Incorrect API key provided: ${server.apiKey}` });
    const review = await guardian().review(call({ path: 'refused' }));
    expect(review).toMatchObject({ failed: true, rationale: 'the reviewer answered HTTP 401' });
    expect(JSON.stringify(review)).not.toContain(server.apiKey);
    const unreachable = new Guardian({
      mode: 'enforce',
      timeoutMs: 2_000,
      endpoint: { baseUrl: 'http://127.0.0.1:1/v1', apiKey: server.apiKey, model: 'guard-1' },
    });
    expect(await unreachable.review(call({ path: 'unreachable' }))).toMatchObject({
      failed: true,
      rationale: 'the reviewer could not be asked (APIConnectionError)',
    });
  });

  it('uses the rule-based reviewer without an endpoint, and does nothing when off', async () => {
    const rules = new Guardian({ mode: 'monitor', timeoutMs: 1_000 });
    expect(await rules.review({ ...call({ path: 'a' }), tool: { server: 'fs', name: 'read_file' } })).toMatchObject({
      risk: 'low',
      reviewer: 'rules:v1',
      mode: 'monitor',
    });
    expect(
      await rules.review({ ...call({ command: 'sudo rm -rf /' }), tool: { server: 'sh', name: 'run' } }),
    ).toMatchObject({
      risk: 'critical',
    });
    expect(await guardian('off').review(call({}))).toMatchObject({
      risk: 'none',
      reviewer: 'off',
      failed: false,
    });
  });
});
