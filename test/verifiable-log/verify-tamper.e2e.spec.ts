import path from 'node:path';
import type { EventLog, RecordedEvent } from '#event-log';
import pg from 'pg';
import { EVENT_LOG } from '../../apps/ledger/src/event-log/event-log-token.js';
import {
  governanceFixture,
  requestTool,
  waitForToolCall,
  type GovernanceFixture,
} from '../support/governance-fixture.js';
import { VerifiableLog } from '../../apps/ledger/src/verifiable-log/verifiable-log.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import { rewriteStreamFrom } from '../support/log-tamper.js';
import { probe } from '../support/probe.js';

/**
 * The verify routes against a database changed behind the service's back: an edited payload, a
 * removed event, and a stream rewritten with freshly computed hashes (caught only by the Merkle
 * log, and with the leaves rewritten too, only by the signed checkpoint).
 */
describe('verifying sessions and tool calls against a tampered database', () => {
  let fixture: GovernanceFixture;
  let ledger: LedgerUnderTest;
  let db: pg.Client;
  let auditor: string;
  beforeAll(async () => {
    fixture = await governanceFixture();
    ledger = await startLedger(fixture.env({ LEDGER_CHECKPOINT_INTERVAL_MS: '200' }));
    db = new pg.Client({ connectionString: ledger.database.connectionString });
    await db.connect();
    auditor = await ledger.credentials.key('verify-auditor', { roles: ['auditor'] });
  });
  afterAll(async () => {
    await db?.end();
    await ledger?.close();
    await fixture?.close();
  });

  const verify = (route: string, credential = auditor) => probe(ledger.baseUrl, 'GET', route, { credential });

  /** A session with two user messages, a reply and a tool call the firewall denies; returns the call's id. */
  async function recordSession(sessionId: string): Promise<string> {
    expect((await ledger.request('POST', '/v1/sessions', { id: sessionId }, undefined, 'producer-1')).status).toBe(201);
    const { toolCallId } = await requestTool(
      ledger.baseUrl,
      sessionId,
      'call_1',
      { server: 'filesystem', name: 'move_file' },
      {
        source: path.join(fixture.workspace, 'hello.txt'),
        destination: path.join(fixture.workspace, 'moved.txt'),
      },
    );
    await waitForToolCall(
      ledger.baseUrl,
      toolCallId,
      (toolCall) => toolCall.status === 'denied' || toolCall.status === 'completed',
    );
    return toolCallId;
  }

  /** The stream's events, once the Merkle log holds them all: tampering comes after the log recorded them. */
  async function streamEvents(streamId: string): Promise<readonly RecordedEvent[]> {
    const events = await ledger.app.get<EventLog>(EVENT_LOG).readStream(streamId);
    await ledger.app.get(VerifiableLog).checkpointCovering(events.at(-1)!.position);
    return events;
  }

  async function verified(route: string) {
    const answer = await verify(route);
    expect(answer.status).toBe(200);
    return answer.body;
  }

  it('finds an untouched session, its tool call and a fork of it whole', async () => {
    const toolCallId = await recordSession('whole');
    const report = await verified('/v1/sessions/whole/verify');
    const sessionEvents = await streamEvents('session-whole');
    const toolCallEvents = await streamEvents(`toolcall-${toolCallId}`);
    expect(report).toMatchObject({ ok: true, checkedEvents: sessionEvents.length + toolCallEvents.length });
    expect(report.firstBroken).toBeUndefined();
    expect(report.streams).toEqual([
      { stream: 'session-whole', events: sessionEvents.length, headHash: sessionEvents.at(-1)!.metadata.hash },
      {
        stream: `toolcall-${toolCallId}`,
        events: toolCallEvents.length,
        headHash: toolCallEvents.at(-1)!.metadata.hash,
      },
    ]);
    expect(report.checkpoint.note.split('\n')[1]).toBe(report.checkpoint.treeSize);
    expect(await verified(`/v1/tool-calls/${toolCallId}/verify`)).toMatchObject({
      ok: true,
      checkedEvents: toolCallEvents.length,
    });

    const forkPoint = sessionEvents[2].position;
    const fork = await ledger.request(
      'POST',
      '/v1/sessions/whole/fork',
      { atPosition: Number(forkPoint), id: 'whole-fork' },
      undefined,
      'producer-1',
    );
    expect(fork.status).toBe(201);
    const forkReport = await verified('/v1/sessions/whole-fork/verify');
    expect(forkReport).toMatchObject({ ok: true, checkedEvents: 1 + 3 });
    expect(forkReport.streams).toEqual([
      { stream: 'session-whole-fork', events: 1, headHash: expect.any(String) },
      { stream: 'session-whole', events: 3, headHash: sessionEvents[2].metadata.hash },
    ]);
  });

  it('names the position of an edited payload, in a session and in a tool call', async () => {
    const toolCallId = await recordSession('edited');
    const [, , third] = await streamEvents('session-edited');
    await db.query(`UPDATE event_log_events SET data = jsonb_set(data, '{content}', '"edited"') WHERE position = $1`, [
      third.position.toString(),
    ]);
    expect(await verified('/v1/sessions/edited/verify')).toMatchObject({
      ok: false,
      firstBroken: {
        stream: 'session-edited',
        revision: '2',
        position: third.position.toString(),
        reason: 'hash_mismatch',
        actual: third.metadata.hash,
      },
    });

    const [requested] = await streamEvents(`toolcall-${toolCallId}`);
    await db.query(`UPDATE event_log_events SET data = jsonb_set(data, '{arguments}', '{}') WHERE position = $1`, [
      requested.position.toString(),
    ]);
    expect(await verified(`/v1/tool-calls/${toolCallId}/verify`)).toMatchObject({
      ok: false,
      firstBroken: {
        stream: `toolcall-${toolCallId}`,
        revision: '0',
        position: requested.position.toString(),
        reason: 'hash_mismatch',
      },
    });
  });

  it('names the position of a removed event, in the middle of a stream or at its end', async () => {
    await recordSession('removed');
    const events = await streamEvents('session-removed');
    await db.query('DELETE FROM event_log_events WHERE position = $1', [events[1].position.toString()]);
    expect(await verified('/v1/sessions/removed/verify')).toMatchObject({
      ok: false,
      firstBroken: {
        stream: 'session-removed',
        revision: '1',
        position: events[1].position.toString(),
        reason: 'missing_event',
      },
    });

    await recordSession('cut');
    const cut = await streamEvents('session-cut');
    const last = cut.at(-1)!;
    await db.query('DELETE FROM event_log_events WHERE position = $1', [last.position.toString()]);
    await db.query(
      `UPDATE event_log_streams SET revision = revision - 1, last_hash = decode($2, 'hex') WHERE stream_id = $1`,
      ['session-cut', last.metadata.prevHash],
    );
    expect(await verified('/v1/sessions/cut/verify')).toMatchObject({
      ok: false,
      firstBroken: {
        stream: 'session-cut',
        revision: last.revision.toString(),
        position: last.position.toString(),
        reason: 'missing_event',
      },
    });
  });

  // Decision 0025: one envelope row holds the tenant, actor and correlation id of many events; each still hashes them.
  it('names the first event of a session whose envelope row was edited (its tenant, for every event naming it)', async () => {
    await recordSession('enveloped');
    const events = await streamEvents('session-enveloped');
    const { rows } = await db.query<{ envelope_key: number }>(
      'SELECT envelope_key FROM event_log_events WHERE position = $1',
      [events[0].position.toString()],
    );
    const { rowCount } = await db.query(
      `UPDATE event_log_envelopes SET tenant = 'globex', actor = 'key:0000000000000000:someone-else'
        WHERE envelope_key = $1`,
      [rows[0].envelope_key],
    );
    expect(rowCount).toBe(1);
    const naming = await db.query('SELECT 1 FROM event_log_events WHERE envelope_key = $1', [rows[0].envelope_key]);
    expect(naming.rowCount).toBeGreaterThan(1);
    expect(await verified('/v1/sessions/enveloped/verify')).toMatchObject({
      ok: false,
      firstBroken: {
        stream: 'session-enveloped',
        revision: '0',
        position: events[0].position.toString(),
        reason: 'hash_mismatch',
        actual: events[0].metadata.hash,
      },
    });
  });

  // One row deleted hides every event naming it from every read (the events themselves are still stored).
  it('names the first event hidden by a deleted envelope row, when it hid every event of a session or a call', async () => {
    const created = await ledger.request('POST', '/v1/sessions', { id: 'unenveloped' }, undefined, 'producer-1');
    expect(created.status).toBe(201);
    const message = { role: 'user', content: 'hello' };
    const posted = await ledger.request('POST', '/v1/sessions/unenveloped/messages', message, undefined, 'producer-1');
    expect(posted.status).toBe(201);
    const events = await streamEvents('session-unenveloped');
    await withEnvelopeDeleted(events[0].position, async () => {
      expect(await ledger.app.get<EventLog>(EVENT_LOG).readStream('session-unenveloped')).toEqual([]);
      expect(await verified('/v1/sessions/unenveloped/verify')).toMatchObject({
        ok: false,
        firstBroken: {
          stream: 'session-unenveloped',
          revision: '0',
          position: events[0].position.toString(),
          reason: 'missing_event',
        },
      });
    });

    // A tool call's events are the saga's, in an envelope of their own.
    const toolCallId = await recordSession('unenveloped-call');
    const [requested] = await streamEvents(`toolcall-${toolCallId}`);
    await withEnvelopeDeleted(requested.position, async () => {
      expect(await verified(`/v1/tool-calls/${toolCallId}/verify`)).toMatchObject({
        ok: false,
        firstBroken: { stream: `toolcall-${toolCallId}`, revision: '0', reason: 'missing_event' },
      });
    });
  });

  /**
   * Runs `check` with the envelope row of the event at `position` deleted, then gives its events their envelope
   * back. The row is shared: events the saga appended in it after the last signing are hidden too, unsigned, and
   * would stop signing for the tests after this one. A saga event appended meanwhile made a new row of the same
   * fields: the hidden events then name that one.
   */
  async function withEnvelopeDeleted(position: bigint, check: () => Promise<void>): Promise<void> {
    const { rows } = await db.query<{
      envelope_key: number;
      tenant: string;
      actor: string;
      correlation_id: string | null;
    }>(
      `DELETE FROM event_log_envelopes
        WHERE envelope_key = (SELECT envelope_key FROM event_log_events WHERE position = $1) RETURNING *`,
      [position.toString()],
    );
    try {
      await check();
    } finally {
      const [{ envelope_key: key, tenant, actor, correlation_id: correlationId }] = rows;
      await db.query(
        `INSERT INTO event_log_envelopes (envelope_key, tenant, actor, correlation_id) OVERRIDING SYSTEM VALUE
         VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`,
        [key, tenant, actor, correlationId],
      );
      await db.query(
        `UPDATE event_log_events SET envelope_key = v.envelope_key FROM event_log_envelopes v
          WHERE event_log_events.envelope_key = $1 AND v.tenant = $2 AND v.actor = $3
            AND v.correlation_id IS NOT DISTINCT FROM $4::text AND v.envelope_key <> $1`,
        [key, tenant, actor, correlationId],
      );
    }
  }

  // With fresh hashes the chain holds: the Merkle log's leaf differs; with the leaves rewritten too, the signed root.
  it('catches a stream rewritten with fresh hashes, and with its leaves rewritten as well', async () => {
    await recordSession('rewritten');
    // Signed first: rewritten before the Merkle consumer took the genuine events, the leaves would hold the new hashes.
    expect(await verified('/v1/sessions/rewritten/verify')).toMatchObject({ ok: true });
    const events = await streamEvents('session-rewritten');
    const rewritten = await rewriteStreamFrom(db, events, 1);
    const first = events[1].position.toString();
    expect(await verified('/v1/sessions/rewritten/verify')).toMatchObject({
      ok: false,
      firstBroken: {
        stream: 'session-rewritten',
        revision: '1',
        position: first,
        reason: 'not_in_log',
        expected: events[1].metadata.hash,
        actual: rewritten[0],
      },
    });

    for (const [i, hash] of rewritten.entries()) {
      await db.query(`UPDATE log_leaves SET event_hash = decode($2, 'hex') WHERE position = $1`, [
        events[1 + i].position.toString(),
        hash,
      ]);
    }
    expect(await verified('/v1/sessions/rewritten/verify')).toMatchObject({
      ok: false,
      firstBroken: { stream: 'session-rewritten', revision: '1', position: first, reason: 'not_in_checkpoint' },
    });
  });

  it('is for auditors, refuses what the tenant does not hold, and names a bad id', async () => {
    await recordSession('guarded');
    const reader = await ledger.credentials.key('verify-reader', { roles: ['reader', 'producer', 'reviewer'] });
    expect((await verify('/v1/sessions/guarded/verify', reader)).status).toBe(403);
    const otherTenant = await ledger.credentials.key('verify-globex', { tenant: 'globex', roles: ['auditor'] });
    expect((await verify('/v1/sessions/guarded/verify', otherTenant)).body).toMatchObject({
      error: { code: 'session_not_found' },
    });
    expect((await verify('/v1/sessions/no-such-session/verify')).status).toBe(404);
    expect((await verify('/v1/tool-calls/no-such-call/verify')).status).toBe(404);
    expect((await verify('/v1/sessions/a%2Fb/verify')).body).toMatchObject({
      error: { code: 'invalid_request', field: 'sid' },
    });
  });
});
