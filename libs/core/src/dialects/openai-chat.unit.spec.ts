import { describeDialect } from '../testing/dialect-suite.js';
import { OPENAI_REFUSALS, OPENAI_STREAMS, OPENAI_WHOLE } from '../testing/dialect-streams.js';
import { openAiChatTranslator } from './openai-chat.js';

describeDialect('openai', OPENAI_STREAMS, OPENAI_REFUSALS, OPENAI_WHOLE);

const chunk = (delta: Record<string, unknown>) => ({
  object: 'chat.completion.chunk',
  choices: [{ index: 0, delta, finish_reason: null }],
});
describe('openai translator', () => {
  it('carries the accumulated text in every text.delta (a snapshot), and the piece it grew by', () => {
    let state = openAiChatTranslator.initial;
    const deltas = ['Hel', 'lo', ', world'].map((piece) => {
      const step = openAiChatTranslator.translate(state, chunk({ content: piece }));
      state = step.state;
      return step.chunks.filter((made) => made.type === 'text.delta');
    });
    expect(deltas.flat()).toEqual([
      { type: 'text.delta', text: 'Hel', grownBy: 'Hel' },
      { type: 'text.delta', text: 'Hello', grownBy: 'lo' },
      { type: 'text.delta', text: 'Hello, world', grownBy: ', world' },
    ]);
  });
});
