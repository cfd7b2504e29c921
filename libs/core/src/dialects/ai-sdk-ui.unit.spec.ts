import { describeDialect } from '../testing/dialect-suite.js';
import { AI_SDK_STREAMS } from '../testing/dialect-streams.js';

const start = { type: 'start' };
const inputStart = { type: 'tool-input-start', toolCallId: 'call_1', toolName: 'get_weather' };

describeDialect('ai-sdk', AI_SDK_STREAMS, [
  { name: 'an unknown part type', events: [start, { type: 'text-chunk', id: 't', delta: 'a' }], field: 'events[1].type' },
  { name: 'a delta that is no string', events: [start, { type: 'text-start', id: 't' }, { type: 'text-delta', id: 't', delta: 5 }], field: 'events[2].delta' },
  { name: 'a text-delta for a part not open', events: [start, { type: 'text-delta', id: 't', delta: 'a' }], field: 'events[1].id' },
  { name: 'a second text part while one is open', events: [start, { type: 'text-start', id: 't1' }, { type: 'text-start', id: 't2' }], field: 'events[2].id' },
  { name: 'a tool output before its input is available', events: [start, inputStart, { type: 'tool-output-available', toolCallId: 'call_1', output: 1 }], field: 'events[2].toolCallId' },
  { name: 'tool input that never becomes available', events: [start, inputStart, { type: 'finish' }], field: 'events[2].type' },
  { name: 'a part after finish', events: [start, { type: 'finish' }, { type: 'text-start', id: 't' }], field: 'events[2].type' },
  { name: 'a second start', events: [start, start], field: 'events[1].type' },
  { name: 'a tool call without its name', events: [start, { type: 'tool-input-start', toolCallId: 'call_1' }], field: 'events[1].toolName' },
]);
