import { parseChunks, type Chunk } from '../chunks/chunk-schemas.js';
import { encodeChunk, EMPTY_SNAPSHOTS } from '../chunks/snapshot-text.js';
import { SessionError } from '../session/session-decider.js';
import { DialectRecording } from '../testing/dialect-recording.js';
import { ANTHROPIC_STREAMS, OPENAI_STREAMS } from '../testing/dialect-streams.js';

const [openAiText] = OPENAI_STREAMS;
const events = openAiText.events;

function thrownBy(run: () => unknown): unknown {
  try {
    run();
  } catch (error) {
    return error;
  }
  return undefined;
}

describe('provider events in the log (ADR 0015)', () => {
  // A raw chunk stands for an event that means no chunk, so every provider event is in the log.
  it('records every provider event as the source of its first chunk', () => {
    const recording = new DialectRecording('anthropic');
    const decision = recording.send(1, ANTHROPIC_STREAMS[0].events.slice(0, 3));
    expect(
      decision.events.map(({ event }) => [
        event.type,
        (event.data as { source: { seq: number; event?: unknown } }).source,
      ]),
    ).toEqual([
      ['chunk.llm_response_created', { dialect: 'anthropic', seq: 1, event: ANTHROPIC_STREAMS[0].events[0] }],
      ['chunk.text.start', { dialect: 'anthropic', seq: 2, event: ANTHROPIC_STREAMS[0].events[1] }],
      ['chunk.raw', { dialect: 'anthropic', seq: 3, event: { type: 'ping' } }],
    ]);
  });

  it('records a retried batch once, reporting duplicates; an overlapping one appends only what is new', () => {
    const recording = new DialectRecording('openai');
    const first = recording.send(1, events.slice(0, 3));
    expect(recording.send(1, events.slice(0, 3))).toEqual({ events: [], duplicateSeqs: [1, 2, 3] });
    const overlapping = recording.send(2, events.slice(1));
    expect(overlapping.duplicateSeqs).toEqual([2, 3]);
    expect(overlapping.events.length).toBeGreaterThan(0);
    const whole = new DialectRecording('openai').sendAll(events).message;
    expect(recording.message).toEqual(whole);
    expect(first.events.length).toBeGreaterThan(0);
  });

  it('refuses a repeated seq with another event (seq_conflict) and a gap (seq_gap), appending nothing', () => {
    const recording = new DialectRecording('openai');
    recording.send(1, events.slice(0, 2));
    expect(thrownBy(() => recording.send(2, [events[2], events[3]]))).toMatchObject({
      code: 'seq_conflict',
      field: 'events[0]',
    });
    expect(thrownBy(() => recording.send(4, [events[3]]))).toMatchObject({ code: 'seq_gap', field: 'seq' });
    expect(recording.message.dialect?.eventDigests.length).toBe(2);
  });

  it('records each text delta as the piece its event added, and folds them back into the whole text', () => {
    const pieces = ['Hel', 'lo', ', wor', 'ld'];
    const recording = new DialectRecording('openai').sendAll([
      { object: 'chat.completion.chunk', choices: [{ index: 0, delta: { role: 'assistant', content: '' } }] },
      ...pieces.map((content) => ({ object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content } }] })),
    ]);
    const deltas = recording.recorded
      .filter((event) => event.type === 'chunk.text.delta')
      .map((event) => event.data as { text?: string; append?: string });
    expect(deltas.map(({ text, append }) => ({ text, append }))).toEqual([
      { text: 'Hel', append: undefined },
      { text: undefined, append: 'lo' },
      { text: undefined, append: ', wor' },
      { text: undefined, append: 'ld' },
    ]);
    expect(recording.message.snapshots.text).toBe('Hello, world');
  });

  it("records a tool call's streamed arguments as what each event added: bytes that grow with the arguments", () => {
    const args = JSON.stringify({ path: 'notes.txt', content: 'line\n'.repeat(4_000) });
    const pieces = args.match(/[^]{1,4}/g)!;
    const toolCall = (fields: Record<string, unknown>) => ({ index: 0, function: { arguments: '' }, ...fields });
    const event = (delta: Record<string, unknown>, finish: string | null = null) => ({
      object: 'chat.completion.chunk',
      choices: [{ index: 0, delta, finish_reason: finish }],
    });
    const recording = new DialectRecording('openai').sendAll(
      [
        event({
          role: 'assistant',
          tool_calls: [toolCall({ id: 'call_1', type: 'function', function: { name: 'write', arguments: '' } })],
        }),
        ...pieces.map((piece) => event({ tool_calls: [toolCall({ function: { arguments: piece } })] })),
        event({}, 'tool_calls'),
      ],
      64,
    );
    const storedBytes = recording.recorded.reduce((sum, { data }) => sum + JSON.stringify(data).length, 0);
    // About 200 bytes per event (the provider event, its chunk's envelope and its piece); 52 MB when stored whole.
    expect(storedBytes).toBeLessThan(pieces.length * 400);
    const [block] = recording.message.blocks.blocks;
    expect(block.metadata?.rawMcpToolResponse).toMatchObject({ id: 'call_1', arguments: JSON.parse(args) });
    expect(recording.message.snapshots.toolArguments.size).toBe(0);
  });

  it("takes a translator's piece as the extension when the lengths add up, and compares the texts when not", () => {
    const grown = { ...EMPTY_SNAPSHOTS, text: 'Hello' };
    const delta = { seq: 2, type: 'text.delta', text: 'Hello, world' } as const;
    expect(encodeChunk(grown, delta, ', world')).toEqual({
      stored: { seq: 2, type: 'text.delta', append: ', world' },
      state: { ...grown, text: 'Hello, world' },
    });
    // The texts are not compared (a translator's text is its own fold of the events the snapshot folds): the piece is
    // kept, and the snapshot after is what a fold of it gives.
    expect(encodeChunk(grown, { ...delta, text: 'Jello, world' }, ', world')).toMatchObject({
      stored: { append: ', world' },
      state: { text: 'Hello, world' },
    });
    // A piece that does not account for the text's growth: the text is compared with the snapshot, as posted ones are.
    expect(encodeChunk(grown, delta, 'world').stored).toEqual({ seq: 2, type: 'text.delta', append: ', world' });
    expect(encodeChunk(grown, { ...delta, text: 'Goodbye' }, 'bye').stored).toEqual({ ...delta, text: 'Goodbye' });
    // A single streaming tool call's arguments, alike.
    const call = { id: 'call_1', tool: { name: 'write' }, status: 'streaming' as const };
    const tracked = encodeChunk(
      EMPTY_SNAPSHOTS,
      { seq: 3, type: 'mcp_tool_streaming', responses: [{ ...call, partialArguments: '{"pa' }] },
      '{"pa',
    ).state;
    const streaming = (partialArguments: string): Chunk => ({
      seq: 4,
      type: 'mcp_tool_streaming',
      responses: [{ ...call, partialArguments }],
    });
    expect(encodeChunk(tracked, streaming('{"xxxx":'), 'th":').stored).toMatchObject({ appendArguments: ['th":'] });
    expect(encodeChunk(tracked, streaming('{"path":'), 'th').stored).toMatchObject({ appendArguments: ['th":'] });
  });

  it('refuses a Cherry chunk posted at a seq a translated chunk holds (seq_conflict), whatever it carries', () => {
    const recording = new DialectRecording('openai');
    recording.send(1, events.slice(0, 2));
    const posted = () =>
      recording.decide({
        type: 'append_chunks',
        messageId: recording.messageId,
        chunks: parseChunks([{ seq: 1, type: 'translation.delta', text: 'Bonjour' }]),
      });
    expect(thrownBy(posted)).toMatchObject({ code: 'seq_conflict', field: 'chunks[0].seq' });
  });

  it('keeps one dialect per message: Cherry chunks or another dialect are a dialect_conflict', () => {
    const recording = new DialectRecording('openai');
    recording.send(1, events.slice(0, 2));
    const { messageId } = recording;
    const cherry = () =>
      recording.decide({
        type: 'append_chunks',
        messageId,
        chunks: parseChunks([{ seq: 3, type: 'raw', content: 1 }]),
      });
    expect(thrownBy(cherry)).toBeInstanceOf(SessionError);
    expect(thrownBy(cherry)).toMatchObject({ code: 'dialect_conflict', field: 'dialect' });
    const anthropic = () =>
      recording.decide({
        type: 'append_dialect_events',
        messageId,
        dialect: 'anthropic',
        firstSeq: 3,
        events: [{ type: 'ping' }],
      });
    expect(thrownBy(anthropic)).toMatchObject({ code: 'dialect_conflict', field: 'dialect' });

    const cherryFirst = new DialectRecording('openai');
    cherryFirst.decide({
      type: 'append_chunks',
      messageId,
      chunks: parseChunks([{ seq: 1, type: 'llm_response_created' }]),
    });
    expect(thrownBy(() => cherryFirst.send(1, events.slice(0, 1)))).toMatchObject({
      code: 'dialect_conflict',
      field: 'dialect',
    });
  });
});
