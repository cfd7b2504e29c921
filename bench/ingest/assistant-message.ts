/** The chunks of one assistant message as Cherry streams it, shared by the closed loop and the fleet. */

export type Chunk = Record<string, unknown> & { seq: number; type: string };

export interface MessageShape {
  readonly thinkingDeltas: number;
  readonly answerDeltas: number;
}

/** Reasoning, a tool round, an answer: a delta per token of a few characters. `snapshotBytes` sums the snapshot lengths. */
export function assistantMessage(shape: MessageShape): { chunks: Chunk[]; snapshotBytes: number } {
  const chunks: Omit<Chunk, 'seq'>[] = [{ type: 'llm_response_created' }, { type: 'thinking.start' }];
  let snapshotBytes = 0;
  const stream = (type: 'thinking' | 'text', tokens: number) => {
    let text = '';
    for (let index = 0; index < tokens; index += 1) {
      text += ` tok${index % 97}`;
      snapshotBytes += text.length;
      chunks.push({ type: `${type}.delta`, text });
    }
    chunks.push({ type: `${type}.complete`, text });
  };
  stream('thinking', shape.thinkingDeltas);
  const tool = { id: 'call_1', tool: { name: 'search', serverId: 's' }, arguments: { q: 'x' }, status: 'pending' };
  chunks.push(
    { type: 'mcp_tool_pending', responses: [tool] },
    {
      type: 'mcp_tool_complete',
      responses: [{ ...tool, status: 'done', response: { content: [{ type: 'text', text: 'result' }] } }],
    },
  );
  chunks.push({ type: 'llm_response_created' }, { type: 'text.start' });
  stream('text', shape.answerDeltas);
  chunks.push({ type: 'block_complete' });
  return { chunks: chunks.map((chunk, index) => ({ seq: index + 1, ...chunk }) as Chunk), snapshotBytes };
}
