import { randomUUID } from 'node:crypto';
import { eventually, startGateway, type GatewayFixture } from '../support/gateway-fixture.js';

/**
 * Attack (issue 14, outsider review): two producers name the same new session at once. Both pass
 * the writer check (the session does not exist yet), both get an answer from the provider, and the
 * first record to land makes its producer the owner; the other's record is refused as not a writer
 * after its answer was relayed. That client was told `X-Ledger-Session`/`X-Ledger-Message` of a
 * message that is in no session, and nothing marks the loss (an attacker who guesses or reads a
 * session id before its first call can make the owner's call vanish from the record this way).
 */
const MODEL = 'gpt-double';

describe('gateway: two producers racing on a new session id', () => {
  let gateway: GatewayFixture;
  beforeAll(async () => {
    gateway = await startGateway({ openAiModels: [MODEL] });
  });
  afterAll(async () => {
    await gateway?.close();
  });

  it('every call answered 200 is in the session it names, or it was refused before the provider', async () => {
    const sessionId = `contested-${randomUUID()}`;
    // The owner's answer comes a little later; the intruder's at once.
    gateway.double.script([{ text: 'For the owner.', firstByteDelayMs: 1_500 }, { text: 'For the intruder.' }]);
    const call = async (who: string, content: string) => {
      const client = await gateway.openai({ sessionId, who });
      const completion = client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content }] });
      const { response } = await completion.withResponse();
      return response.headers.get('x-ledger-message')!;
    };
    const before = gateway.double.exchanges.length;
    const owner = call('racer-owner', 'Mine');
    // The owner's call has passed the gateway's checks once the provider has it.
    await eventually(
      async () => gateway.double.exchanges.length,
      (count) => count > before,
    );
    const intruder = call('racer-intruder', 'Also mine');
    const outcomes = await Promise.allSettled([owner, intruder]);
    const announced = outcomes.flatMap((outcome) => (outcome.status === 'fulfilled' ? [outcome.value] : []));
    const readTree = () => gateway.ledger.request('GET', `/v1/sessions/${sessionId}/tree`);
    const settled = (answer: { status: number; body: any }) =>
      answer.status === 200 && answer.body.messages.length >= 2 * announced.length;
    const tree = await eventually(readTree, settled);
    const recorded = new Set(tree.body.messages.map((message: { id: string }) => message.id));
    expect(announced.filter((messageId) => !recorded.has(messageId))).toEqual([]);
  });
});
