import type { Chunk } from '../chunks/chunk-schemas.js';
import { decodeChunk, EMPTY_SNAPSHOTS, type StoredChunk } from '../chunks/snapshot-text.js';
import type { TranslatedChunk, Translation } from '../dialects/dialect.js';
import { translatorOf, type DialectName } from '../dialects/dialects.js';
import { SessionError } from '../session/session-decider.js';
import { compareBlocks } from './block-vectors.js';
import { DialectRecording } from './dialect-recording.js';
import type { DialectStream, RefusedStream, WholeResponses } from './dialect-streams.js';

/**
 * The checks every translator passes: its streams give the expected blocks however they are
 * batched, a whole response gives what its stream gives, and bad input is refused naming its field.
 */
export function describeDialect(
  dialect: DialectName,
  streams: readonly DialectStream[],
  refused: readonly RefusedStream[],
  wholes: WholeResponses = { responses: [], afterToolRound: [] },
): void {
  describe.each(streams)(`${dialect}: $name`, (stream) => {
    it('gives the blocks a Cherry producer of the same answer would get', () => {
      const { message } = new DialectRecording(dialect).sendAll(stream.events);
      expect(message.blocks.status).toBe(stream.expected.messageStatus);
      const [actual, expected] = compareBlocks(message.blocks.blocks, stream.expected.blocks);
      expect(actual).toEqual(expected);
    });

    it('records each delta so that a fold of the log gives the text and arguments the translator made', () => {
      const translator = translatorOf(dialect);
      let state = translator.initial;
      const made = stream.events.flatMap((event) => {
        const step = translator.translate(state, event);
        state = step.state;
        // An event that means no chunk is recorded as a raw one.
        return step.chunks.length > 0 ? step.chunks : [{ type: 'raw' as const, content: null }];
      });
      let snapshots = EMPTY_SNAPSHOTS;
      // Two events per request: each request's decision starts from the state the ones before left.
      const folded = new DialectRecording(dialect)
        .sendAll(stream.events, 2)
        .recorded.filter((event) => event.type.startsWith('chunk.'))
        .map((event) => {
          const decoded = decodeChunk(snapshots, event.data as StoredChunk);
          snapshots = decoded.state;
          return decoded.chunk;
        });
      expect(folded.map(grownParts)).toEqual(made.map(grownParts));
    });

    it('gives the same message one event per request: the translator state is rebuilt from the recorded events', () => {
      const whole = new DialectRecording(dialect).sendAll(stream.events).message;
      const single = new DialectRecording(dialect).sendAll(stream.events, 1).message;
      const threes = new DialectRecording(dialect).sendAll(stream.events, 3).message;
      expect(single).toEqual(whole);
      expect(threes).toEqual(whole);
    });
  });

  if (wholes.responses.length > 0) describeWholeResponses(dialect, wholes);

  describe.each(refused)(`${dialect} refuses $name`, ({ events, field }) => {
    it(`with invalid_event naming ${field}, appending nothing`, () => {
      const recording = new DialectRecording(dialect);
      let thrown: unknown;
      try {
        recording.send(1, events);
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(SessionError);
      expect(thrown).toMatchObject({ code: 'invalid_event', field });
      expect((thrown as Error).message.startsWith(`${field}: `)).toBe(true);
      expect(recording.message.chunkDigests.length).toBe(0);
    });
  });
}

/** A whole (non-streaming) response gives the chunks, and so the blocks, its stream gives. */
function describeWholeResponses(dialect: DialectName, wholes: WholeResponses): void {
  const translator = translatorOf(dialect);
  const fold = (events: readonly unknown[], state = translator.initial) =>
    events.reduce<Translation<unknown>>(
      (step, event) => {
        const next = translator.translate(step.state, event);
        return { state: next.state, chunks: [...step.chunks, ...next.chunks] };
      },
      { state, chunks: [] },
    );

  describe.each(wholes.responses)(`${dialect}: a whole response, $name`, ({ whole, stream }) => {
    it('translates to the chunks of the stream that carries the same answer, first or after a tool round', () => {
      expect(translator.translate(translator.initial, whole).chunks).toEqual(fold(stream).chunks);
      const afterRound = fold(wholes.afterToolRound).state;
      expect(translator.translate(afterRound, whole).chunks).toEqual(fold(stream, afterRound).chunks);
    });

    it('is recorded as one provider event, giving the blocks its stream gives', () => {
      const blocksOf = (events: readonly unknown[]) => {
        const { blocks } = new DialectRecording(dialect).sendAll(events).message;
        return { status: blocks.status, blocks: blocks.blocks.map(({ id, createdAt, updatedAt, ...block }) => block) };
      };
      expect(blocksOf([whole])).toEqual(blocksOf(stream));
    });
  });
}

/** What grows in a chunk: a delta's text so far, each streaming tool call's arguments so far. */
function grownParts(chunk: TranslatedChunk | Chunk): unknown {
  if ('text' in chunk) return [chunk.type, chunk.text];
  if (chunk.type === 'mcp_tool_streaming')
    return [chunk.type, chunk.responses.map((response) => response.partialArguments)];
  return [chunk.type];
}
