/**
 * Probe: a fork near the start of a full source counts only the prefix it stands on, so a chain
 * of forks, each forked at its source's first event and then filled, is within quota at every
 * level. verify and export, however, read every source stream whole (StreamVerifier.sessionStreams
 * reads whole streams, then filters by the fork point), so one request on the deepest fork reads
 * (depth + 1) x 1.25 x quota events.
 */
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import { authorization } from '../support/test-credentials.js';
import { EVENT_LOG } from '../../apps/ledger/src/event-log/event-log.module.js';

describe('verify and export of a chain of forks', () => {
  let ledger: LedgerUnderTest;
  const QUOTA = 50;
  const DEPTH = 3;
  beforeAll(async () => {
    ledger = await startLedger({ LEDGER_SESSION_MAX_EVENTS: String(QUOTA), LEDGER_SESSION_MAX_FORK_DEPTH: String(DEPTH) });
  });
  afterAll(async () => {
    await ledger?.close();
  });

  const deltas = (from: number, count: number) =>
    Array.from({ length: count }, (_, index) =>
      from + index === 1 ? { seq: 1, type: 'text.start' } : { seq: from + index, type: 'text.delta', text: 'word' },
    );
  const countEvents = async (sessionId: string) => {
    let total = 0;
    for (let from = 0; ; ) {
      const page = await ledger.request('GET', `/v1/sessions/${sessionId}/events?limit=1000&from=${from}`);
      total += page.body.events.length;
      if (page.body.next === null) return total;
      from = page.body.next;
    }
  };
  /** Fills a session with one assistant message's chunks until the quota's share refuses more. */
  const fill = async (sessionId: string) => {
    expect((await ledger.request('POST', `/v1/sessions/${sessionId}/messages`, { id: 'a1', role: 'assistant' })).status).toBe(201);
    let seq = 1;
    for (;;) {
      const r = await ledger.request('POST', `/v1/sessions/${sessionId}/messages/a1/chunks`, deltas(seq, 10));
      if (r.status === 409) return;
      expect(r.status).toBeLessThan(300);
      seq += 10;
    }
  };

  it('reads every level whole', async () => {
    const opened = await ledger.request('POST', '/v1/sessions', { title: 'root' });
    let sessionId: string = opened.body.id;
    let firstPosition: number = opened.body.position;
    await fill(sessionId);
    const own: number[] = [await countEvents(sessionId)];
    for (let level = 1; level <= DEPTH; level += 1) {
      const fork = await ledger.request('POST', `/v1/sessions/${sessionId}/fork`, { atPosition: firstPosition });
      expect(fork.status).toBe(201);
      sessionId = fork.body.id;
      firstPosition = fork.body.position;
      await fill(sessionId);
      own.push(await countEvents(sessionId));
    }
    // Count what the log hands out while verify runs.
    const log = ledger.app.get(EVENT_LOG) as { readStream: (...args: any[]) => Promise<readonly unknown[]> };
    const original = log.readStream.bind(log);
    let readDuringVerify = 0;
    log.readStream = async (...args: any[]) => {
      const events = await original(...args);
      readDuringVerify += events.length;
      return events;
    };
    const verify = await ledger.request('GET', `/v1/sessions/${sessionId}/verify`);
    log.readStream = original;
    const exported = await fetch(`${ledger.baseUrl}/v1/sessions/${sessionId}/export`, {
      headers: await authorization(ledger.baseUrl, 'client'),
    });
    const lines = (await exported.text()).trim().split('\n').length;
    console.log(JSON.stringify({ readDuringVerify, quota: QUOTA, ownEventsPerLevel: own, verifyStatus: verify.status, checkedEvents: verify.body.checkedEvents, streams: verify.body.streams, exportStatus: exported.status, exportLines: lines }));
    // The deepest fork's own fold stands on ~1 event of each source; verify reads all of them.
    expect(verify.body.checkedEvents).toBeLessThan(QUOTA * 1.25 + 5);
    expect(readDuringVerify).toBeGreaterThan(QUOTA * 1.25 * (DEPTH + 1));
  }, 300_000);
});
