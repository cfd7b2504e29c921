import { describeDialect } from '../testing/dialect-suite.js';
import { ANTHROPIC_STREAMS } from '../testing/dialect-streams.js';

const start = { type: 'message_start', message: { id: 'msg_1', type: 'message', role: 'assistant', content: [], usage: { input_tokens: 5, output_tokens: 1 } } };
const textStart = { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } };
const toolStart = { type: 'content_block_start', index: 0, content_block: { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: {} } };
const json = (partial: string) => ({ type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: partial } });

describeDialect('anthropic', ANTHROPIC_STREAMS, [
  { name: 'an unknown event type', events: [start, { type: 'content_block_begin', index: 0 }], field: 'events[1].type' },
  { name: 'an index as a string', events: [start, textStart, { type: 'content_block_delta', index: '0', delta: { type: 'text_delta', text: 'a' } }], field: 'events[2].index' },
  { name: 'a text_delta whose text is a number', events: [start, textStart, { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 1 } }], field: 'events[2].delta.text' },
  { name: 'a content block before message_start', events: [textStart], field: 'events[0].type' },
  { name: 'a delta for a block never started', events: [start, { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'a' } }], field: 'events[1].index' },
  { name: 'a block that skips an index', events: [start, { ...textStart, index: 1 }], field: 'events[1].index' },
  { name: 'a text_delta into a tool_use block', events: [start, toolStart, { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'a' } }], field: 'events[2].delta.type' },
  { name: 'tool input that never completes', events: [start, toolStart, json('{"city": "Pa'), { type: 'content_block_stop', index: 0 }], field: 'events[3].index' },
  { name: 'tool input that is no object', events: [start, toolStart, json('[1, 2]'), { type: 'content_block_stop', index: 0 }], field: 'events[3].index' },
  { name: 'message_stop while a block is open', events: [start, textStart, { type: 'message_stop' }], field: 'events[2].type' },
  { name: 'a content block type the dialect does not take', events: [start, { type: 'content_block_start', index: 0, content_block: { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: {} } }], field: 'events[1].content_block.type' },
  { name: 'an event after message_stop', events: [start, { type: 'message_delta', delta: { stop_reason: 'end_turn' } }, { type: 'message_stop' }, textStart], field: 'events[3].type' },
]);
