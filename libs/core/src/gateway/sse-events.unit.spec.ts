import { SDK_READING, SseEventReader } from './sse-events.js';

const bytes = (text: string) => new TextEncoder().encode(text);

/** Every event the reader takes from `parts`, sent one after another, then the stream's end. */
function read(parts: readonly string[], maxEventLength?: number) {
  const reader = new SseEventReader(SDK_READING.openai, maxEventLength);
  const events = [...parts.flatMap((part) => reader.push(bytes(part))), ...reader.end()];
  return { events, unreadable: reader.unreadable };
}

describe('reading a provider stream for the record', () => {
  it('takes each event as the client SDK does, however the bytes are cut', () => {
    const stream = 'data: {"a":1}\r\n\r\n: comment\n\ndata: {"b":\r\ndata: 2}\r\rdata: [DONE]\n\n';
    const whole = read([stream]);
    expect(whole).toEqual({ events: [{ a: 1 }, { b: 2 }, '[DONE]'], unreadable: 0 });
    // Cut between every pair of characters, \r\n included: the same events.
    for (let cut = 1; cut < stream.length; cut += 1)
      expect(read([stream.slice(0, cut), stream.slice(cut)])).toEqual(whole);
    expect(read(stream.split(''))).toEqual(whole);
  });

  it("ends where OpenAI's SDK stops reading (at [DONE] under any event name, or at data that is not JSON), counting what follows", () => {
    // Another client (the AI SDK) reads on: the two events after the stop are counted, not recorded.
    const after = 'data: {"after":1}\n\ndata: not json\n\n';
    expect(read([`data: {"a":1}\n\nevent: thread.x\ndata: [DONE]\n\n${after}`])).toEqual({
      events: [{ a: 1 }, '[DONE]'],
      unreadable: 2,
    });
    // `[DONE]x` is not JSON: the SDK throws there.
    expect(read([`data: {"a":1}\n\ndata: [DONE]x\n\n${after}`])).toEqual({ events: [{ a: 1 }], unreadable: 3 });
    // A field without a colon is that field, empty (the SSE spec): `data` alone is data the SDK cannot parse.
    expect(read([`data: {"a":1}\n\ndata\n\n${after}`])).toEqual({ events: [{ a: 1 }], unreadable: 3 });
    // Anthropic's SDK has no [DONE], and skips what it does not read by name.
    const anthropic = new SseEventReader(SDK_READING.anthropic);
    const text = 'event: ping\ndata: [DONE]\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n';
    expect([...anthropic.push(bytes(text)), ...anthropic.end()]).toEqual([{ type: 'message_stop' }]);
  });

  it('counts an event whose data is too long, without holding it, and what follows it (the SDK may have thrown on it)', () => {
    const line = `data: "${'x'.repeat(40)}",\n`;
    // Many short data lines of one event (a JSON array once joined), together past the limit.
    const parts = ['data: [\n', line, line, line, 'data: "last"]\n', '\ndata: {"after":true}\n\n'];
    const { events, unreadable } = read(parts, 100);
    expect({ events, unreadable }).toEqual({ events: [], unreadable: 2 });
  });

  it('drops a line too long to read up to its end, so nothing from its middle is recorded', () => {
    // A comment past the limit, then what looks like data on the same line: the client's SDK reads one comment.
    const comment = `: ${'z'.repeat(200)}`;
    const forged = 'data: {"forged":true}';
    expect(read([comment, forged, '\n\ndata: {"seen":true}\n\n'], 100)).toEqual({
      events: [{ seen: true }],
      unreadable: 0,
    });
    // A data line past the limit spoils its event, whatever its other lines hold.
    const long = `data: ${'1'.repeat(200)}`;
    expect(read(['data: {"a":\n', long.slice(0, 50), long.slice(50), '\ndata: 1}\n\n'], 100)).toEqual({
      events: [],
      unreadable: 1,
    });
  });
});
