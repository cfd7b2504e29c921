import Anthropic from '@anthropic-ai/sdk';
import { createOpenAI } from '@ai-sdk/openai';
import { stepCountIs, streamText, tool } from 'ai';
import OpenAI from 'openai';
import { z } from 'zod';
import { startProviderDouble, type ProviderDouble } from './index.js';

// The doubles the gateway tests run against, driven here by the official clients directly: if a
// client accepts what a double sends and a double refuses what the real API refuses, a gateway
// test against the double says something about the real providers.

const KEYS = ['key-a', 'key-b'];
const weatherCalls = [
  { id: 'call_paris', name: 'weather', arguments: '{"city":"Paris"}' },
  { id: 'call_rome', name: 'weather', arguments: '{"city":"Rome"}' },
];

describe('provider doubles', () => {
  let double: ProviderDouble;
  beforeAll(async () => {
    double = await startProviderDouble({ keys: KEYS });
  });
  afterEach(() => double.resetScripts());
  afterAll(async () => {
    await double?.close();
  });
  const openai = (apiKey = 'key-a') => new OpenAI({ baseURL: `${double.baseUrl}/v1`, apiKey, maxRetries: 0 });
  const anthropic = (apiKey = 'key-a') => new Anthropic({ baseURL: double.baseUrl, apiKey, maxRetries: 0 });

  describe('OpenAI Chat Completions', () => {
    it('answers without streaming: text, reasoning, usage and the caller key in the exchange', async () => {
      double.script({ reasoning: 'Think first.', text: 'Hello there', usage: { inputTokens: 7, outputTokens: 3 } });
      const completion = await openai('key-b').chat.completions.create({
        model: 'gpt-test',
        messages: [{ role: 'user', content: 'Hi' }],
      });
      expect(completion.choices[0].message).toMatchObject({
        role: 'assistant',
        content: 'Hello there',
        reasoning_content: 'Think first.',
      });
      expect(completion.choices[0].finish_reason).toBe('stop');
      expect(completion.usage).toMatchObject({ prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 });
      expect(double.exchanges.at(-1)).toMatchObject({
        path: '/v1/chat/completions',
        key: 'key-b',
        status: 200,
        aborted: false,
      });
      expect(double.exchanges.at(-1)!.body.messages).toEqual([{ role: 'user', content: 'Hi' }]);
    });

    it('streams text and reasoning in pieces, parallel tool calls interleaved by index, usage and [DONE]', async () => {
      double.script({ reasoning: 'Two cities.', text: 'Checking.', toolCalls: weatherCalls, chunkChars: 5 });
      const stream = await openai().chat.completions.create({
        model: 'gpt-test',
        messages: [{ role: 'user', content: 'Weather in Paris and Rome?' }],
        stream: true,
        stream_options: { include_usage: true },
      });
      const chunks = [];
      for await (const chunk of stream) chunks.push(chunk);
      const deltas = chunks.flatMap((chunk) => chunk.choices.map((choice) => choice.delta as Record<string, any>));
      expect(deltas.map((delta) => delta.content ?? '').join('')).toBe('Checking.');
      expect(deltas.map((delta) => delta.reasoning_content ?? '').join('')).toBe('Two cities.');
      const toolDeltas = deltas.flatMap((delta) => delta.tool_calls ?? []);
      expect(toolDeltas.map((call) => call.index)).toEqual([0, 1, 0, 1, 0, 1, 0, 1, 0]);
      const argumentsOf = (index: number) =>
        toolDeltas
          .filter((call) => call.index === index)
          .map((call) => call.function.arguments)
          .join('');
      expect([argumentsOf(0), argumentsOf(1)]).toEqual(weatherCalls.map((call) => call.arguments));
      expect(toolDeltas.filter((call) => call.id).map((call) => [call.id, call.function.name])).toEqual([
        ['call_paris', 'weather'],
        ['call_rome', 'weather'],
      ]);
      expect(chunks.at(-2)!.choices[0].finish_reason).toBe('tool_calls');
      expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { total_tokens: expect.any(Number) } });
      const sent = double.exchanges.at(-1)!.sentBytes.toString();
      expect(sent).toMatch(/^data: \{"id":"chatcmpl-\d+","object":"chat.completion.chunk"/);
      expect(sent.endsWith('}\n\ndata: [DONE]\n\n')).toBe(true);
    });

    it('runs a tool loop, and refuses a tool message that answers no call or a call left unanswered', async () => {
      double.script([{ toolCalls: weatherCalls }, { text: 'Sunny in both.' }]);
      const client = openai();
      const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [
        { role: 'user', content: 'Weather in Paris and Rome?' },
      ];
      const first = await client.chat.completions.create({ model: 'gpt-test', messages });
      const calls = first.choices[0].message.tool_calls ?? [];
      expect(calls.map((call) => call.id)).toEqual(['call_paris', 'call_rome']);
      messages.push(
        first.choices[0].message,
        ...calls.map((call) => ({ role: 'tool' as const, tool_call_id: call.id, content: 'sunny' })),
      );
      const second = await client.chat.completions.create({ model: 'gpt-test', messages });
      expect(second.choices[0].message.content).toBe('Sunny in both.');

      const unknownCall = [
        ...messages.slice(0, 2),
        { role: 'tool' as const, tool_call_id: 'call_nowhere', content: 'x' },
      ];
      await expect(client.chat.completions.create({ model: 'gpt-test', messages: unknownCall })).rejects.toMatchObject({
        status: 400,
        param: 'messages[2].tool_call_id',
        type: 'invalid_request_error',
      });
      const unanswered = messages.slice(0, 3);
      const refusal = client.chat.completions.create({ model: 'gpt-test', messages: unanswered });
      await expect(refusal).rejects.toBeInstanceOf(OpenAI.BadRequestError);
      await expect(refusal).rejects.toThrow(/call_rome/);
    });

    it('sends exactly the bytes it records, and the same script gives the same bytes on another double', async () => {
      const script = { reasoning: 'r', text: 'Same bytes', toolCalls: weatherCalls.slice(0, 1) };
      const other = await startProviderDouble({ keys: KEYS });
      try {
        const bodies = [];
        for (const target of [double, other]) {
          target.script(script);
          const exchangesBefore = target.exchanges.length;
          const response = await fetch(`${target.baseUrl}/v1/chat/completions`, {
            method: 'POST',
            headers: { authorization: 'Bearer key-a', 'content-type': 'application/json' },
            body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'x' }], stream: true }),
          });
          const received = Buffer.from(await response.arrayBuffer());
          expect(received.equals(target.exchanges[exchangesBefore].sentBytes)).toBe(true);
          bodies.push(received.toString().replace(/chatcmpl-\d+/g, 'chatcmpl-N'));
        }
        expect(bodies[0]).toBe(bodies[1]);
      } finally {
        await other.close();
      }
    });
  });

  describe('OpenAI Responses', () => {
    const tools: OpenAI.Responses.Tool[] = [
      {
        type: 'function',
        name: 'weather',
        parameters: { type: 'object', properties: { city: { type: 'string' } } },
        strict: false,
      },
    ];

    async function streamedResponse(
      client: OpenAI,
      body: Omit<OpenAI.Responses.ResponseCreateParamsStreaming, 'stream'>,
    ) {
      const stream = await client.responses.create({ ...body, stream: true });
      const events = [];
      for await (const event of stream) events.push(event);
      return { events, response: (events.at(-1) as OpenAI.Responses.ResponseCompletedEvent).response };
    }

    it('streams a tool loop with reasoning, and refuses the call sent back without its reasoning item', async () => {
      double.script([{ reasoning: 'Need the weather.', toolCalls: weatherCalls }, { text: 'Sunny in both.' }]);
      const client = openai();
      const request = { model: 'o-test', tools, store: false, include: ['reasoning.encrypted_content' as const] };
      const user = { role: 'user' as const, content: 'Weather in Paris and Rome?' };
      const first = await streamedResponse(client, { ...request, input: [user] });
      expect(first.events.map((event) => event.sequence_number)).toEqual(first.events.map((_, index) => index));
      const summary = first.events.filter((event) => event.type === 'response.reasoning_summary_text.delta');
      expect(summary.map((event) => event.delta).join('')).toBe('Need the weather.');
      // What came out goes back in as it came, which is how the API expects a stateless tool loop.
      const output = first.response.output as OpenAI.Responses.ResponseInputItem[];
      const [reasoning, ...calls] = output;
      expect(reasoning).toMatchObject({ type: 'reasoning', encrypted_content: expect.any(String) });
      expect(calls.map((item) => item.type === 'function_call' && item.call_id)).toEqual(['call_paris', 'call_rome']);
      const results = calls.map((item) => ({
        type: 'function_call_output' as const,
        call_id: (item as OpenAI.Responses.ResponseFunctionToolCall).call_id,
        output: 'sunny',
      }));

      const second = await streamedResponse(client, { ...request, input: [user, ...output, ...results] });
      expect(second.response.output).toMatchObject([
        { type: 'message', content: [{ type: 'output_text', text: 'Sunny in both.' }] },
      ]);

      const withoutReasoning = client.responses.create({ ...request, input: [user, ...calls, ...results] });
      await expect(withoutReasoning).rejects.toBeInstanceOf(OpenAI.BadRequestError);
      await expect(withoutReasoning).rejects.toThrow(/without its required 'reasoning' item/);
      const forged = { ...(reasoning as OpenAI.Responses.ResponseReasoningItem), encrypted_content: 'forged' };
      await expect(
        client.responses.create({ ...request, input: [user, forged, ...calls, ...results] }),
      ).rejects.toThrow(/could not be verified/);
    });

    it('answers without streaming, with web search citations', async () => {
      double.script({
        text: 'Paris is sunny.',
        search: { query: 'paris weather', results: [{ url: 'https://w.example/paris', title: 'Paris' }] },
      });
      const response = await openai().responses.create({ model: 'o-test', input: 'Weather in Paris?' });
      expect(response.output_text).toBe('Paris is sunny.');
      expect(response.output).toMatchObject([
        { type: 'web_search_call', status: 'completed', action: { type: 'search', query: 'paris weather' } },
        { type: 'message', content: [{ annotations: [{ type: 'url_citation', url: 'https://w.example/paris' }] }] },
      ]);
    });
  });

  describe('Anthropic Messages', () => {
    const tools: Anthropic.Tool[] = [
      { name: 'weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } },
    ];
    const request = {
      model: 'claude-test',
      max_tokens: 2048,
      thinking: { type: 'enabled' as const, budget_tokens: 1024 },
      tools,
    };

    it('streams signed thinking and a tool loop, refused when the thinking is missing or altered', async () => {
      double.script([
        { reasoning: 'Need the weather.', text: 'Let me check.', toolCalls: weatherCalls, chunkChars: 3 },
        { text: 'Sunny.' },
      ]);
      const client = anthropic();
      const user: Anthropic.MessageParam = { role: 'user', content: 'Weather in Paris and Rome?' };
      const stream = client.messages.stream({ ...request, messages: [user] });
      const deltaTypes: string[] = [];
      stream.on('streamEvent', (event) => {
        if (event.type === 'content_block_delta') deltaTypes.push(event.delta.type);
      });
      const first = await stream.finalMessage();
      expect(first.content.map((block) => block.type)).toEqual(['thinking', 'text', 'tool_use', 'tool_use']);
      expect(first.content[0]).toMatchObject({ thinking: 'Need the weather.', signature: expect.any(String) });
      expect(first.content[2]).toMatchObject({ id: 'call_paris', name: 'weather', input: { city: 'Paris' } });
      expect(first.stop_reason).toBe('tool_use');
      expect(deltaTypes).toEqual(
        expect.arrayContaining(['thinking_delta', 'signature_delta', 'text_delta', 'input_json_delta']),
      );
      const results: Anthropic.MessageParam = {
        role: 'user',
        content: weatherCalls.map((call) => ({ type: 'tool_result' as const, tool_use_id: call.id, content: 'sunny' })),
      };

      const second = await client.messages
        .stream({ ...request, messages: [user, { role: 'assistant', content: first.content }, results] })
        .finalMessage();
      expect(second.content).toMatchObject([{ type: 'text', text: 'Sunny.' }]);

      const withoutThinking = { role: 'assistant' as const, content: first.content.slice(1) };
      const refused = client.messages.create({ ...request, messages: [user, withoutThinking, results] });
      await expect(refused).rejects.toBeInstanceOf(Anthropic.BadRequestError);
      await expect(refused).rejects.toThrow(/Expected `thinking` or `redacted_thinking`, but found `text`/);
      const altered = {
        role: 'assistant' as const,
        content: [{ ...first.content[0], signature: 'forged' }, ...first.content.slice(1)],
      };
      await expect(client.messages.create({ ...request, messages: [user, altered, results] })).rejects.toThrow(
        /Invalid `signature`/,
      );
      const { signature: _dropped, ...unsigned } = first.content[0] as Anthropic.ThinkingBlock;
      const withoutSignature = { role: 'assistant' as const, content: [unsigned, ...first.content.slice(1)] };
      await expect(
        client.messages.create({ ...request, messages: [user, withoutSignature as Anthropic.MessageParam, results] }),
      ).rejects.toThrow(/messages\.1\.content\.0\.thinking\.signature: Field required/);
    });

    it('refuses a history whose roles do not alternate or whose tool_result answers nothing', async () => {
      const client = anthropic();
      const twice = [
        { role: 'user' as const, content: 'a' },
        { role: 'user' as const, content: 'b' },
      ];
      await expect(client.messages.create({ model: 'claude-test', max_tokens: 10, messages: twice })).rejects.toThrow(
        /roles must alternate/,
      );
      const stray: Anthropic.MessageParam[] = [
        { role: 'user', content: 'a' },
        { role: 'assistant', content: 'b' },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_none', content: 'x' }] },
      ];
      await expect(client.messages.create({ model: 'claude-test', max_tokens: 10, messages: stray })).rejects.toThrow(
        /unexpected `tool_use_id` found in `tool_result` blocks: toolu_none/,
      );
    });

    it('refuses a request without anthropic-version', async () => {
      const response = await fetch(`${double.baseUrl}/v1/messages`, {
        method: 'POST',
        headers: { 'x-api-key': 'key-a', 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'claude-test', max_tokens: 10, messages: [{ role: 'user', content: 'a' }] }),
      });
      expect(response.status).toBe(400);
      expect(await response.json()).toEqual({
        type: 'error',
        error: { type: 'invalid_request_error', message: 'anthropic-version: header is required' },
      });
    });

    it('streams web search results and citations', async () => {
      const search = { query: 'paris weather', results: [{ url: 'https://w.example/paris', title: 'Paris' }] };
      double.script({ text: 'Paris is sunny.', search });
      const message = await anthropic()
        .messages.stream({ model: 'claude-test', max_tokens: 100, messages: [{ role: 'user', content: 'x' }] })
        .finalMessage();
      expect(message.content).toMatchObject([
        { type: 'server_tool_use', name: 'web_search', input: { query: 'paris weather' } },
        { type: 'web_search_tool_result', content: [{ type: 'web_search_result', url: 'https://w.example/paris' }] },
        {
          type: 'text',
          text: 'Paris is sunny.',
          citations: [{ type: 'web_search_result_location', url: 'https://w.example/paris' }],
        },
      ]);
    });
  });

  describe('refusals and failures', () => {
    it('a 429 with Retry-After surfaces as RateLimitError, for the scripted key only', async () => {
      double.script({ status: 429, retryAfter: 7 }, { key: 'key-b' });
      double.script({ text: 'fine' });
      const refused = await openai('key-b')
        .chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'x' }] })
        .catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(OpenAI.RateLimitError);
      expect((refused as InstanceType<typeof OpenAI.RateLimitError>).headers.get('retry-after')).toBe('7');
      expect(refused).toMatchObject({ code: 'rate_limit_exceeded' });
      const answered = await openai('key-a').chat.completions.create({
        model: 'gpt-test',
        messages: [{ role: 'user', content: 'x' }],
      });
      expect(answered.choices[0].message.content).toBe('fine');
    });

    it('an unknown key gets 401 as AuthenticationError from both SDKs', async () => {
      const messages = [{ role: 'user' as const, content: 'x' }];
      await expect(openai('key-unknown').chat.completions.create({ model: 'm', messages })).rejects.toBeInstanceOf(
        OpenAI.AuthenticationError,
      );
      await expect(
        anthropic('key-unknown').messages.create({ model: 'm', max_tokens: 5, messages }),
      ).rejects.toBeInstanceOf(Anthropic.AuthenticationError);
      expect(double.exchanges.at(-1)).toMatchObject({ key: 'key-unknown', status: 401 });
    });

    it.each([
      [400, 'BadRequestError'],
      [401, 'AuthenticationError'],
      [403, 'PermissionDeniedError'],
      [429, 'RateLimitError'],
      [500, 'InternalServerError'],
      [503, 'InternalServerError'],
    ] as const)(
      "a scripted %i surfaces as %s in both SDKs, with each provider's error body",
      async (status, errorClass) => {
        double.script([
          { status, message: 'scripted refusal' },
          { status, message: 'scripted refusal' },
        ]);
        const messages = [{ role: 'user' as const, content: 'x' }];
        const openAiError = await openai()
          .chat.completions.create({ model: 'm', messages })
          .catch((error: unknown) => error);
        expect(openAiError).toBeInstanceOf(OpenAI[errorClass]);
        expect(openAiError).toMatchObject({ status, error: { message: 'scripted refusal', type: expect.any(String) } });
        const anthropicError = await anthropic()
          .messages.create({ model: 'm', max_tokens: 5, messages })
          .catch((error: unknown) => error);
        expect(anthropicError).toBeInstanceOf(Anthropic[errorClass]);
        expect(JSON.parse(double.exchanges.at(-1)!.sentBytes.toString())).toEqual({
          type: 'error',
          error: { type: expect.stringMatching(/_error$/), message: 'scripted refusal' },
        });
      },
    );

    it('a scripted function answers per request; an unscripted call gets a 500 that says so', async () => {
      double.script((request, key) => ({ text: `${request.protocol} ${request.body.model} ${key}` }), { key: 'key-b' });
      const answer = await openai('key-b').responses.create({ model: 'o-fn', input: 'x' });
      expect(answer.output_text).toBe('openai-responses o-fn key-b');
      await expect(openai('key-a').responses.create({ model: 'o-fn', input: 'x' })).rejects.toThrow(
        /no scripted reply/,
      );
    });

    it.each([
      [
        'chat',
        (client: OpenAI) =>
          client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x' }], stream: true }),
      ],
      ['responses', (client: OpenAI) => client.responses.create({ model: 'm', input: 'x', stream: true })],
    ])(
      'an OpenAI %s stream that fails after N events throws APIError in the SDK after those events',
      async (_protocol, call) => {
        double.script({
          text: 'a long answer that will not finish',
          chunkChars: 2,
          failAfterChunks: 3,
          errorMessage: 'upstream fell over',
        });
        const received: unknown[] = [];
        const consume = async () => {
          for await (const event of await call(openai())) received.push(event);
        };
        await expect(consume()).rejects.toThrow(/upstream fell over/);
        expect(received).toHaveLength(3);
      },
    );

    it('an Anthropic stream that fails after N events throws the error event in the SDK', async () => {
      double.script({ text: 'a long answer', chunkChars: 2, failAfterChunks: 4, errorMessage: 'Overloaded' });
      const stream = anthropic().messages.stream({
        model: 'm',
        max_tokens: 5,
        messages: [{ role: 'user', content: 'x' }],
      });
      await expect(stream.finalMessage()).rejects.toThrow(/Overloaded/);
      expect(double.exchanges.at(-1)!.sentBytes.toString()).toMatch(
        /event: error\ndata: \{"type":"error","error":\{"type":"api_error"/,
      );
    });

    it('marks an exchange aborted when the client goes away mid-stream', async () => {
      double.script({ text: 'slow answer in many pieces', chunkChars: 1, chunkDelayMs: 20 });
      const controller = new AbortController();
      const stream = await openai().chat.completions.create(
        { model: 'm', messages: [{ role: 'user', content: 'x' }], stream: true },
        { signal: controller.signal },
      );
      for await (const chunk of stream) {
        if (chunk.choices[0]?.delta.content) controller.abort();
      }
      await double.settled();
      expect(double.exchanges.at(-1)!.aborted).toBe(true);
    });
  });

  describe('AI SDK streamText (Responses) multi-step tool loop', () => {
    it.each([
      ['stored items, sent back by item_reference', {}],
      ['store: false, reasoning sent back with its encrypted content', { openai: { store: false } }],
    ])('completes with %s', async (_case, providerOptions) => {
      double.script([
        { reasoning: 'Two lookups.', toolCalls: weatherCalls },
        { reasoning: 'Done.', text: 'Sunny in Paris and Rome.' },
      ]);
      const provider = createOpenAI({ baseURL: `${double.baseUrl}/v1`, apiKey: 'key-a' });
      const exchangesBefore = double.exchanges.length;
      const result = streamText({
        model: provider('o4-mini'),
        prompt: 'Weather in Paris and Rome?',
        tools: {
          weather: tool({
            inputSchema: z.object({ city: z.string() }),
            execute: async ({ city }) => ({ city, sky: 'sunny' }),
          }),
        },
        stopWhen: stepCountIs(3),
        providerOptions,
        maxRetries: 0,
      });
      expect(await result.text).toBe('Sunny in Paris and Rome.');
      const steps = await result.steps;
      expect(steps.map((step) => step.finishReason)).toEqual(['tool-calls', 'stop']);
      expect(steps[0].toolResults.map((toolResult) => toolResult.output)).toEqual([
        { city: 'Paris', sky: 'sunny' },
        { city: 'Rome', sky: 'sunny' },
      ]);
      const sent = double.exchanges.slice(exchangesBefore);
      expect(sent.map((exchange) => exchange.status)).toEqual([200, 200]);
      expect(sent[1].body.input.map((item: any) => item.type ?? item.role)).toEqual(
        expect.arrayContaining(['function_call', 'function_call_output']),
      );
    });
  });

  it('AI SDK streamText (Chat Completions) runs parallel interleaved tool calls to a final answer', async () => {
    double.script([{ toolCalls: weatherCalls, chunkChars: 3 }, { text: 'Both sunny.' }]);
    const provider = createOpenAI({ baseURL: `${double.baseUrl}/v1`, apiKey: 'key-a' });
    const result = streamText({
      model: provider.chat('gpt-test'),
      prompt: 'Weather in Paris and Rome?',
      tools: {
        weather: tool({ inputSchema: z.object({ city: z.string() }), execute: async ({ city }) => `${city}: sunny` }),
      },
      stopWhen: stepCountIs(3),
      maxRetries: 0,
    });
    expect(await result.text).toBe('Both sunny.');
    expect((await result.steps)[0].toolResults.map((toolResult) => toolResult.output)).toEqual([
      'Paris: sunny',
      'Rome: sunny',
    ]);
  });
});
