import { randomUUID } from 'node:crypto';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { eventually, gatewayForSuite } from '../support/gateway-fixture.js';

/**
 * Issue 14 acceptance: a conversation with two regenerations and an edit, sent as plain stateless
 * requests (the OpenAI client through the gateway, Chat Completions), gives the same tree as the
 * same actions through the native API (messages created under a parent, answers streamed as
 * chunks). The trees are compared structurally, ids aside: per message its role, content, model,
 * status and text, its children in order, and which child is selected.
 */
const MODEL = 'gpt-double';
const system = 'Be brief.';
const question = 'What is the capital of France?';
const followUp = 'And of Italy?';
const edited = 'And of Spain?';
/** The answers in the order both runs produce them. */
const answers = ['Paris.', 'It is Paris.', 'Rome.', 'It is Rome.', 'Madrid.'];
/** System, question, two answers, two user turns, three answers. */
const MESSAGES = 9;

interface TreeNode {
  readonly role: string;
  readonly content: string | null;
  readonly model: string | null;
  readonly status: string;
  readonly text: readonly string[];
  readonly children: readonly TreeNode[];
  /** Index of the selected child among `children`, -1 for none. */
  readonly selected: number;
}

describe('gateway: the tree of stateless calls is the tree of the same actions through the native API', () => {
  const gateway = gatewayForSuite();

  /** The session's tree as nested nodes from the roots down, children in order, with the selected child's index. */
  async function treeOf(sessionId: string, as: string): Promise<{ roots: TreeNode[]; selectedRoot: number }> {
    // The read models follow the log: wait until they hold every message of the conversation, each ended.
    const tree = await eventually(
      () => gateway().ledger.request('GET', `/v1/sessions/${sessionId}/tree`, undefined, undefined, as),
      (read) => {
        const messages = (read.body.messages ?? []) as { status: string }[];
        return messages.length === MESSAGES && messages.every((message) => message.status === 'success');
      },
    );
    expect(tree.status).toBe(200);
    const byId = new Map<string, { children: string[]; selectedChild: string | null }>(
      tree.body.messages.map((message: { id: string }) => [message.id, message]),
    );
    const node = async (id: string): Promise<TreeNode> => {
      const read = await gateway().ledger.request(
        'GET',
        `/v1/sessions/${sessionId}/messages/${id}`,
        undefined,
        undefined,
        as,
      );
      const { role, content, model, status, blocks } = read.body as {
        role: string;
        content: string | null;
        model: string | null;
        status: string;
        blocks: { type: string; content?: string }[];
      };
      const { children, selectedChild } = byId.get(id)!;
      return {
        role,
        content,
        model,
        status,
        text: blocks.filter((block) => block.type === 'main_text').map((block) => block.content ?? ''),
        children: await Promise.all(children.map(node)),
        selected: selectedChild === null ? -1 : children.indexOf(selectedChild),
      };
    };
    const roots = tree.body.roots as string[];
    return { roots: await Promise.all(roots.map(node)), selectedRoot: roots.indexOf(tree.body.selectedRoot) };
  }

  async function throughGateway(): Promise<string> {
    const sessionId = `tree-gateway-${randomUUID()}`;
    // The SDK stops reading at `[DONE]` and sends the next call at once, before the last answer's record
    // is complete: the gateway places it after that record all the same.
    const client = await gateway().openai({ sessionId });
    gateway().double.script(answers.map((text) => ({ text })));
    const ask = async (messages: ChatCompletionMessageParam[]) => {
      const stream = client.chat.completions.stream({ model: MODEL, messages, stream: true });
      return (await stream.finalChatCompletion()).choices[0].message.content!;
    };
    const opening: ChatCompletionMessageParam[] = [
      { role: 'system', content: system },
      { role: 'user', content: question },
    ];
    await ask(opening);
    const regenerated = await ask(opening); // regeneration 1
    const continued: ChatCompletionMessageParam[] = [...opening, { role: 'assistant', content: regenerated }];
    await ask([...continued, { role: 'user', content: followUp }]);
    await ask([...continued, { role: 'user', content: followUp }]); // regeneration 2
    await ask([...continued, { role: 'user', content: edited }]); // the edit
    return sessionId;
  }

  async function throughNativeApi(): Promise<string> {
    const created = await gateway().ledger.request('POST', '/v1/sessions', { title: 'native' }, undefined, 'agent');
    expect(created.status).toBe(201);
    const sessionId = created.body.id as string;
    let answered = 0;
    const message = async (role: string, parentId: string | null, content?: string) => {
      const body = {
        role,
        parentId,
        ...(content === undefined ? {} : { content }),
        ...(role === 'assistant' ? { model: MODEL } : {}),
      };
      const response = await gateway().ledger.request(
        'POST',
        `/v1/sessions/${sessionId}/messages`,
        body,
        undefined,
        'agent',
      );
      expect(response.status).toBe(201);
      return response.body.id as string;
    };
    const answer = async (parentId: string) => {
      const id = await message('assistant', parentId);
      const text = answers[answered++];
      const chunks = [
        { seq: 1, type: 'llm_response_created' },
        { seq: 2, type: 'text.start' },
        { seq: 3, type: 'text.delta', text },
        { seq: 4, type: 'text.complete', text },
        { seq: 5, type: 'block_complete' },
      ];
      const streamed = await gateway().ledger.request(
        'POST',
        `/v1/sessions/${sessionId}/messages/${id}/chunks`,
        chunks,
        undefined,
        'agent',
      );
      expect(streamed.status).toBe(200);
      return id;
    };
    const systemId = await message('system', null, system);
    const questionId = await message('user', systemId, question);
    await answer(questionId);
    const regenerated = await answer(questionId); // regeneration 1
    const followUpId = await message('user', regenerated, followUp);
    await answer(followUpId);
    await answer(followUpId); // regeneration 2
    await answer(await message('user', regenerated, edited)); // the edit
    return sessionId;
  }

  it('two regenerations and an edit', async () => {
    const recorded = await treeOf(await throughGateway(), 'agent');
    const native = await treeOf(await throughNativeApi(), 'agent');
    expect(recorded).toEqual(native);
    // The shape itself: regenerations are selected siblings, the edit a selected sibling of the user turn.
    const [systemNode] = recorded.roots;
    const questionNode = systemNode.children[0];
    expect(questionNode.children.map((child) => child.text)).toEqual([['Paris.'], ['It is Paris.']]);
    expect(questionNode.selected).toBe(1);
    const turns = questionNode.children[1].children;
    expect(turns.map((turn) => [turn.content, turn.children.map((child) => child.text[0])])).toEqual([
      [followUp, ['Rome.', 'It is Rome.']],
      [edited, ['Madrid.']],
    ]);
    expect(questionNode.children[1].selected).toBe(1);
    expect(turns[0].selected).toBe(1);
  });
});
