import { Stream as AnthropicStream } from '@anthropic-ai/sdk/core/streaming';
import { Stream as OpenAIStream } from 'openai/core/streaming';
import { SDK_READING, SseEventReader } from '#core';

/**
 * The record reads a provider's stream as the client's SDK does (decision 0016): the same bytes, fed to the real
 * SDK's stream parser and to the gateway's reader, give the same events, and the reader stops where the SDK stops
 * (it returns, or throws). Each stream is fed whole, byte by byte, and cut at every place.
 */
type Protocol = 'openai' | 'anthropic';

interface Reading {
  readonly events: unknown[];
  /** The SDK threw (the provider's error, or data it could not parse); the reader raised it or counted it. */
  readonly threw: boolean;
}

const bytes = (text: string) => new TextEncoder().encode(text);

function body(parts: readonly Uint8Array[]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(controller) {
      for (const part of parts) controller.enqueue(part);
      controller.close();
    },
  });
}

async function sdkReading(protocol: Protocol, parts: readonly Uint8Array[]): Promise<Reading> {
  const response = new Response(body(parts), { headers: { 'content-type': 'text/event-stream' } });
  const quiet = { error: () => undefined, warn: () => undefined, info: () => undefined, debug: () => undefined };
  const client = { logger: quiet, logLevel: 'off' };
  const stream =
    protocol === 'openai'
      ? OpenAIStream.fromSSEResponse(response, new AbortController(), client as never)
      : AnthropicStream.fromSSEResponse(response, new AbortController(), client as never);
  const events: unknown[] = [];
  try {
    for await (const event of stream as AsyncIterable<unknown>) events.push(event);
    return { events, threw: false };
  } catch {
    return { events, threw: true };
  }
}

/** What the reader took, and how many events it counted as left out. */
function reading(protocol: Protocol, parts: readonly Uint8Array[]): Reading & { readonly counted: number } {
  const reader = new SseEventReader(SDK_READING[protocol]);
  const read = [...parts.flatMap((part) => reader.push(part)), ...reader.end()];
  // `[DONE]` is the record's end marker; the SDK ends there without yielding it.
  const events = read.filter((event) => event !== '[DONE]');
  return { events, threw: reader.raised !== undefined || reader.unreadable > 0, counted: reader.unreadable };
}

const chunk = (text: string) =>
  JSON.stringify({ object: 'chat.completion.chunk', choices: [{ delta: { content: text } }] });
const delta = (text: string) => JSON.stringify({ type: 'content_block_delta', delta: { type: 'text_delta', text } });

const STREAMS: Record<Protocol, Record<string, string>> = {
  openai: {
    'plain, then [DONE]': `data: ${chunk('a')}\n\ndata: ${chunk('b')}\n\ndata: [DONE]\n\ndata: ${chunk('after')}\n\n`,
    'a byte order mark before a line': `data: ${chunk('a')}\n\n\uFEFFdata: ${chunk('hidden?')}\n\n`,
    'a byte order mark first in the stream, twice': `\uFEFF\uFEFFdata: ${chunk('a')}\n\ndata: ${chunk('b')}\n\n`,
    'an event with a name and no data': `data: ${chunk('a')}\n\nevent: x\n\ndata: ${chunk('after')}\n\n`,
    'an error event carrying a chunk': `data: ${chunk('a')}\n\nevent: error\ndata: ${chunk('b')}\n\ndata: ${chunk('c')}\n\n`,
    'a chunk with an error in it': `data: ${chunk('a')}\n\ndata: {"object":"x","error":{"message":"boom"}}\n\n`,
    'a thread event carrying a chunk': `data: ${chunk('a')}\n\nevent: thread.message.delta\ndata: ${chunk('b')}\n\n`,
    'an empty event name, then data alone': `event:\n\ndata: ${chunk('a')}\n\n`,
    'the last event without its blank line': `data: ${chunk('a')}\n\ndata: ${chunk('last')}`,
    'carriage returns alone': `data: ${chunk('a')}\r\rdata: ${chunk('b')}\r\r`,
    'an empty event name': `event:\ndata: ${chunk('a')}\n\n`,
    'a field without a colon, then data': `data\n\ndata: ${chunk('after')}\n\n`,
    'a comment and unknown fields': `: hi\nid: 1\nretry: 5\ndata: ${chunk('a')}\n\n`,
    'data on two lines': `data: {"object":"x",\ndata: "choices":[]}\n\n`,
  },
  anthropic: {
    plain: `event: content_block_delta\ndata: ${delta('a')}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n`,
    'a byte order mark before an event': `event: content_block_delta\ndata: ${delta('a')}\n\n\uFEFFevent: content_block_delta\ndata: ${delta('b')}\n\n`,
    'an unknown event name': `event: content_block_deltax\ndata: ${delta('a')}\n\n`,
    'empty data, then more': `event: content_block_delta\ndata:\n\nevent: content_block_delta\ndata: ${delta('b')}\n\n`,
    'the last event without its blank line': `event: content_block_delta\ndata: ${delta('a')}\n\nevent: content_block_delta\ndata: ${delta('last')}`,
    'ping and unnamed events': `event: ping\ndata: {"type":"ping"}\n\ndata: ${delta('unnamed')}\n\nevent: content_block_delta\ndata: ${delta('a')}\n\n`,
    'an error event': `event: content_block_delta\ndata: ${delta('a')}\n\nevent: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"busy"}}\n\nevent: content_block_delta\ndata: ${delta('c')}\n\n`,
    'data that is not JSON': `event: content_block_delta\ndata: ${delta('a')}\n\nevent: content_block_delta\ndata: nope\n\nevent: content_block_delta\ndata: ${delta('c')}\n\n`,
    'an empty event name with data': `event:\ndata: ${delta('a')}\n\n`,
    'an empty event name, then data alone': `event:\n\ndata: ${delta('hidden?')}\n\nevent: content_block_delta\ndata: ${delta('b')}\n\n`,
    'a stream ending one line break after an event': `event: content_block_delta\ndata: ${delta('a')}\n\nevent: content_block_delta\ndata: ${delta('open')}\n`,
    'carriage return and line feed': `event: content_block_delta\r\ndata: ${delta('a')}\r\n\r\n`,
  },
};

describe('the record reads a provider stream as the client SDK does', () => {
  for (const protocol of ['openai', 'anthropic'] as const)
    describe(protocol, () => {
      // What the record holds is what the SDK read, or it counts what it left out (the record then marks a gap):
      // never silently different.
      it.each(Object.entries(STREAMS[protocol]))('%s', async (_name, stream) => {
        const whole = [bytes(stream)];
        const sdk = await sdkReading(protocol, whole);
        const read = reading(protocol, whole);
        if (read.counted === 0) expect(read).toEqual({ ...sdk, counted: 0 });
        else expect(sdk.events).toEqual(expect.arrayContaining(read.events));
        const byteByByte = [...bytes(stream)].map((byte) => Uint8Array.of(byte));
        expect(reading(protocol, byteByByte)).toEqual(read);
        for (let cut = 1; cut < whole[0].length; cut += 7)
          expect(reading(protocol, [whole[0].subarray(0, cut), whole[0].subarray(cut)])).toEqual(read);
      });
    });

  it.each<[Protocol, string, number]>([
    // The AI SDK reads on past [DONE], past an error and through thread.* events; it drops a line starting with a
    // byte order mark, and never reads an event left without its closing blank line.
    ['openai', 'plain, then [DONE]', 1],
    ['openai', 'an error event carrying a chunk', 1],
    ['openai', 'a thread event carrying a chunk', 1],
    ['openai', 'a byte order mark before a line', 1],
    ['openai', 'the last event without its blank line', 1],
    ['anthropic', 'a byte order mark before an event', 1],
    ['anthropic', 'an error event', 1],
    ['anthropic', 'the last event without its blank line', 0],
    ['anthropic', 'a stream ending one line break after an event', 0],
  ])('%s, %s: what another client may read is counted (%i)', (protocol, name, counted) => {
    expect(reading(protocol, [bytes(STREAMS[protocol][name])]).counted).toBe(counted);
  });

  it('reads nothing of an event a broken stream left open: no client reads it', () => {
    const reader = new SseEventReader(SDK_READING.openai);
    expect(reader.push(bytes(`data: ${chunk('a')}\n\ndata: ${chunk('open')}`))).toHaveLength(1);
    expect(reader.end(true)).toEqual([]);
    expect(reader.unreadable).toBe(0);
  });

  it('counts an event whose name is too long to read, and reads nothing after an event too long to read', () => {
    const reader = new SseEventReader(SDK_READING.anthropic, 100);
    const events = reader.push(
      bytes(
        `event: ${'x'.repeat(200)}\ndata: ${delta('hidden')}\n\n` +
          `event: content_block_delta\ndata: ${delta('after')}\n\n`,
      ),
    );
    expect({ events, counted: reader.unreadable }).toEqual({ events: [], counted: 2 });
  });

  it('says what the provider raised, under a name of its own', () => {
    const reader = new SseEventReader(SDK_READING.anthropic);
    reader.push(bytes(STREAMS.anthropic['an error event']));
    expect(reader.raised).toEqual({ name: 'ProviderError', message: 'overloaded_error: busy' });
    const openai = new SseEventReader(SDK_READING.openai);
    openai.push(bytes('data: {"error":{"type":"AbortError","message":"the client disconnected"}}\n\n'));
    expect(openai.raised).toEqual({ name: 'ProviderError', message: 'AbortError: the client disconnected' });
  });
});
