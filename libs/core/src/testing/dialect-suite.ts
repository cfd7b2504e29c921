import type { DialectName } from '../dialects/dialects.js';
import { SessionError } from '../session/session-decider.js';
import { compareBlocks } from './block-vectors.js';
import { DialectRecording } from './dialect-recording.js';
import type { DialectStream, RefusedStream } from './dialect-streams.js';

/**
 * The checks every translator passes: its streams give the expected blocks however they are
 * batched, and bad input is refused naming its field.
 */
export function describeDialect(
  dialect: DialectName,
  streams: readonly DialectStream[],
  refused: readonly RefusedStream[],
): void {
  describe.each(streams)(`${dialect}: $name`, (stream) => {
    it('gives the blocks a Cherry producer of the same answer would get', () => {
      const { message } = new DialectRecording(dialect).sendAll(stream.events);
      expect(message.blocks.status).toBe(stream.expected.messageStatus);
      const [actual, expected] = compareBlocks(message.blocks.blocks, stream.expected.blocks);
      expect(actual).toEqual(expected);
    });

    it('gives the same message one event per request: the translator state is rebuilt from the recorded events', () => {
      const whole = new DialectRecording(dialect).sendAll(stream.events).message;
      const single = new DialectRecording(dialect).sendAll(stream.events, 1).message;
      const threes = new DialectRecording(dialect).sendAll(stream.events, 3).message;
      expect(single).toEqual(whole);
      expect(threes).toEqual(whole);
    });
  });

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
      expect(recording.message.chunkDigests).toEqual([]);
    });
  });
}
