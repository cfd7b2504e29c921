import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';

const text = (from: number, ...steps: object[]) => steps.map((step, index) => ({ seq: from + index, ...step }));

describe('forking a session', () => {
  let ledger: LedgerUnderTest;
  beforeAll(async () => {
    ledger = await startLedger();
  });
  afterAll(async () => {
    await ledger?.close();
  });

  async function ok(method: string, path: string, body?: unknown, as?: string) {
    const response = await ledger.request(method, path, body, undefined, as);
    expect(response.status).toBeLessThan(300);
    return response.body;
  }
  async function allEvents(sessionId: string) {
    const events: { id: string; type: string; position: number; metadata: { hash: string; prevHash: string } }[] = [];
    for (let from = 0; ;) {
      const page = await ok('GET', `/v1/sessions/${sessionId}/events?from=${from}&limit=3`);
      events.push(...page.events);
      if (page.next === null) return events;
      from = page.next;
    }
  }
  // toEqual treats an undefined property as absent.
  const withoutPosition = (read: { position: number }) => ({ ...read, position: undefined });

  it('continues from the source as of a mid-session position; appending to the fork leaves the source untouched', async () => {
    const source = (await ok('POST', '/v1/sessions', { title: 'source', metadata: { team: 'audit' } })).id;
    await ok('POST', `/v1/sessions/${source}/messages`, { id: 'u1', role: 'user', content: 'Write a haiku' });
    await ok('POST', `/v1/sessions/${source}/messages`, { id: 'a1', role: 'assistant' });
    const mid = (
      await ok(
        'POST',
        `/v1/sessions/${source}/messages/a1/chunks`,
        text(1, { type: 'llm_response_created' }, { type: 'text.start' }, { type: 'text.delta', text: 'Autumn' }),
      )
    ).position;
    const end = (
      await ok(
        'POST',
        `/v1/sessions/${source}/messages/a1/chunks`,
        text(
          4,
          { type: 'text.delta', text: 'Autumn moonlight' },
          { type: 'text.complete', text: 'Autumn moonlight' },
          { type: 'block_complete' },
        ),
      )
    ).position;

    const sourceRead = await ok('GET', `/v1/sessions/${source}?minPosition=${end}`);
    const sourceTree = await ok('GET', `/v1/sessions/${source}/tree?minPosition=${end}`);
    const sourceEvents = await allEvents(source);
    const sourceAtMid = await ok('GET', `/v1/sessions/${source}?at=${mid}`);

    const fork = await ledger.request('POST', `/v1/sessions/${source}/fork`, { atPosition: mid, title: 'what if' });
    expect(fork).toMatchObject({
      status: 201,
      body: { forkedFrom: { sessionId: source, position: mid, messageId: null } },
    });
    const forkId: string = fork.body.id;

    // The fork reads as the source did at that position, under its own id and title.
    const forkRead = await ok('GET', `/v1/sessions/${forkId}?minPosition=${fork.body.position}`);
    expect(forkRead).toMatchObject({
      id: forkId,
      title: 'what if',
      metadata: { team: 'audit' },
      forkedFrom: { sessionId: source, position: mid },
    });
    expect(forkRead.messages).toEqual(sourceAtMid.messages);
    expect(forkRead.messages[1].blocks[0]).toMatchObject({ type: 'main_text', status: 'streaming', content: 'Autumn' });

    // The fork's log holds the reference, not a copy of the source's chunks.
    expect((await allEvents(forkId)).map((event) => event.type)).toEqual(['session.forked']);

    // Append to the fork: the streaming message goes on differently, and the conversation continues.
    await ok(
      'POST',
      `/v1/sessions/${forkId}/messages/a1/chunks`,
      text(
        4,
        { type: 'text.delta', text: 'Autumn rain on tin' },
        { type: 'text.complete', text: 'Autumn rain on tin' },
        { type: 'block_complete' },
      ),
    );
    expect(
      await ok('POST', `/v1/sessions/${forkId}/messages`, { id: 'u2', role: 'user', content: 'Another' }),
    ).toMatchObject({ parentId: 'a1' });
    const last = (await ok('POST', `/v1/sessions/${forkId}/messages`, { id: 'a2', role: 'assistant' })).position;

    const forked = await ok('GET', `/v1/sessions/${forkId}?minPosition=${last}`);
    expect(forked.messages.map((m: { id: string }) => m.id)).toEqual(['u1', 'a1', 'u2', 'a2']);
    expect(forked.messages[1].blocks[0]).toMatchObject({ content: 'Autumn rain on tin', status: 'success' });
    expect((await ok('GET', `/v1/sessions/${forkId}/history?minPosition=${last}`)).messages.slice(0, 3)).toEqual([
      { role: 'user', content: 'Write a haiku' },
      { role: 'assistant', content: 'Autumn rain on tin' },
      { role: 'user', content: 'Another' },
    ]);
    // ?at= on the fork resolves through the reference too; before the fork existed there is nothing.
    expect((await ok('GET', `/v1/sessions/${forkId}?at=${fork.body.position}`)).messages).toEqual(sourceAtMid.messages);
    expect((await ledger.request('GET', `/v1/sessions/${forkId}?at=${mid}`)).status).toBe(404);

    // The source: same reads, same events, same hash chain.
    expect(withoutPosition(await ok('GET', `/v1/sessions/${source}?minPosition=${last}`))).toEqual(
      withoutPosition(sourceRead),
    );
    expect(withoutPosition(await ok('GET', `/v1/sessions/${source}/tree?minPosition=${last}`))).toEqual(
      withoutPosition(sourceTree),
    );
    const after = await allEvents(source);
    expect(after).toEqual(sourceEvents);
    after.forEach((event, index) => index > 0 && expect(event.metadata.prevHash).toBe(after[index - 1].metadata.hash));

    // A fork of the fork, and a rebuild of every read model, resolve the same way.
    const again = await ok('POST', `/v1/sessions/${forkId}/fork`, { messageId: 'a1' });
    const twice = await ok('GET', `/v1/sessions/${again.id}?minPosition=${again.position}`);
    expect(twice.messages.map((m: { id: string }) => m.id)).toEqual(['u1', 'a1']);
    expect(twice.messages[1].blocks[0].content).toBe('Autumn rain on tin');
    const reply = await ok('POST', `/v1/sessions/${again.id}/messages`, { role: 'user', content: 'Shorter' });
    expect(reply.parentId).toBe('a1');
    await ok('POST', '/v1/admin/rebuild', undefined, 'admin');
    expect(withoutPosition(await ok('GET', `/v1/sessions/${forkId}?minPosition=${last}`))).toEqual(
      withoutPosition(forked),
    );
    expect(withoutPosition(await ok('GET', `/v1/sessions/${source}`))).toEqual(withoutPosition(sourceRead));
  });

  it('answers the same fork again with the first answer, and refuses another under its id naming what differs', async () => {
    const source = (await ok('POST', '/v1/sessions', {})).id;
    const head = (await ok('POST', `/v1/sessions/${source}/messages`, { id: 'u1', role: 'user', content: 'hi' }))
      .position;
    await ok('POST', `/v1/sessions/${source}/messages`, { id: 'u2', role: 'user', content: 'later' });
    const body = { id: `${source}-fork`, atPosition: head, messageId: 'u1', title: 'a fork' };
    const first = await ledger.request('POST', `/v1/sessions/${source}/fork`, body);
    expect(first.status).toBe(201);
    const again = await ledger.request('POST', `/v1/sessions/${source}/fork`, body);
    expect(again).toEqual({ status: 200, body: first.body });
    for (const [change, field] of [
      [{ title: 'another title' }, 'title'],
      [{ atPosition: undefined }, 'atPosition'],
      [{ messageId: undefined }, 'messageId'],
    ] as const) {
      const other = await ledger.request('POST', `/v1/sessions/${source}/fork`, { ...body, ...change });
      expect(other).toMatchObject({ status: 409, body: { error: { code: 'session_exists', field } } });
    }
    const { events } = await ok('GET', `/v1/sessions/${body.id}/events`);
    expect(events.map((event: { type: string }) => event.type)).toEqual(['session.forked']);
  });

  it('refuses a fork it cannot pin down, naming the field, and records nothing', async () => {
    const source = (await ok('POST', '/v1/sessions', {})).id;
    const head = (await ok('POST', `/v1/sessions/${source}/messages`, { id: 'u1', role: 'user', content: 'hi' }))
      .position;
    const cases: [unknown, number, string | undefined][] = [
      [{}, 400, 'atPosition'],
      [{ atPosition: head + 1000 }, 422, 'atPosition'],
      [{ atPosition: -1 }, 400, 'atPosition'],
      [{ messageId: 'nope' }, 404, 'messageId'],
      [{ atPosition: head, extra: 1 }, 400, 'extra'],
    ];
    for (const [body, status, field] of cases) {
      const response = await ledger.request('POST', `/v1/sessions/${source}/fork`, body);
      expect({ body, status: response.status, field: response.body.error.field }).toEqual({ body, status, field });
    }
    expect((await ledger.request('POST', '/v1/sessions/missing/fork', { messageId: 'u1' })).status).toBe(404);
    expect((await ledger.request('POST', `/v1/sessions/${source}/fork`, { atPosition: 1 })).body.error.code).toBe(
      'source_not_found',
    );
    const { events } = await ok('GET', `/v1/sessions/${source}/events`);
    expect(events.map((event: { type: string }) => event.type)).toEqual(['session.opened', 'message.created']);
  });
});
