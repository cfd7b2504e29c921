/**
 * Rebuild of the block read models (`POST /v1/admin/rebuild` runs the same code), in process,
 * against reading the same events through the log alone in the same run (the rebuild's pages, the
 * projection's filter, only the fields read models fold, as the rebuild reads them; nothing folded
 * or written): how close the rebuild comes to the speed at which its input arrives. A third row
 * folds the pages read, held in memory, as the projection does (each session's events of a page
 * at once, then its change set), with nothing read or written: the fold's own speed. The log is
 * seeded through the session repository (decide, hash chain, group commit) with SESSIONS sessions
 * of RESPONSES assistant responses shaped like bench:ingest's (reasoning, a tool round, an answer:
 * 209 chunk events each). Runs with the service's V8 flags (`SERVICE_NODE_FLAGS`), as the rebuild
 * runs in the service and the CLI.
 *
 *   npm run bench:rebuild   (DATABASE_URL: a scratch database, seeded on the first run, measured as is later)
 */
import { initialSessionState, parseChunks, SESSION_STREAM_PREFIX, sessionChanges, type SessionState } from '#core';
import { createPostgresEventLog, type EventLogReader, type ProjectionEvent } from '#event-log';
import os from 'node:os';
import pg from 'pg';
import { rebuildReadModels } from '../../apps/ledger/src/projections/read-model-projections.js';
import { REBUILD_PAGE } from '../../apps/ledger/src/projections/rebuild.js';
import { SessionRepository } from '../../apps/ledger/src/sessions/session-repository.js';
import { foldSessionEvents } from '../../apps/ledger/src/sessions/session-fold.js';
import {
  formatRate,
  formatRatio,
  openBenchDatabase,
  printTable,
  reranWithServiceNodeFlags,
} from '../support/bench-database.js';

const SESSIONS = Number(process.env.BENCH_SESSIONS ?? 200);
const RESPONSES = Number(process.env.BENCH_RESPONSES ?? 5);
const CHUNKS_PER_POST = 20;
const PARALLEL_SESSIONS = 16;
const RUNS = 2;

/** One assistant response the way Cherry streams it (snapshot deltas): reasoning, a tool round, an answer. */
function response(): unknown[] {
  const chunks: Record<string, unknown>[] = [{ type: 'llm_response_created' }, { type: 'thinking.start' }];
  const stream = (type: 'thinking' | 'text', tokens: number) => {
    let text = '';
    for (let index = 0; index < tokens; index += 1) {
      text += ` tok${index % 97}`;
      chunks.push({ type: `${type}.delta`, text });
    }
    chunks.push({ type: `${type}.complete`, text });
  };
  stream('thinking', 40);
  const tool = { id: 'call_1', tool: { name: 'search', serverId: 's' }, arguments: { q: 'x' }, status: 'pending' };
  chunks.push(
    { type: 'mcp_tool_pending', responses: [tool] },
    {
      type: 'mcp_tool_complete',
      responses: [{ ...tool, status: 'done', response: { content: [{ type: 'text', text: 'result' }] } }],
    },
    { type: 'llm_response_created' },
    { type: 'text.start' },
  );
  stream('text', 160);
  chunks.push({ type: 'block_complete' });
  return chunks.map((chunk, index) => ({ seq: index + 1, ...chunk }));
}

async function seed(repository: SessionRepository): Promise<void> {
  const author = { actor: 'bench', subject: 'bench' };
  const chunks = response();
  const seedSession = async (index: number) => {
    const session = { tenant: 'default', sessionId: `bench-${index}` };
    const opening = { sessionId: session.sessionId, title: null, metadata: {}, owner: 'bench', writers: [] };
    await repository.execute(session, { type: 'open_session', ...opening }, author);
    for (let turn = 0; turn < RESPONSES; turn += 1) {
      const message = { parentId: undefined, model: null } as const;
      const user = { ...message, type: 'create_message', messageId: `u${turn}`, role: 'user', content: 'q' } as const;
      await repository.execute(session, user, author);
      const messageId = `a${turn}`;
      const assistant = { ...message, type: 'create_message', messageId, role: 'assistant', content: null } as const;
      await repository.execute(session, assistant, author);
      for (let start = 0; start < chunks.length; start += CHUNKS_PER_POST) {
        const batch = parseChunks(chunks.slice(start, start + CHUNKS_PER_POST));
        await repository.execute(session, { type: 'append_chunks', messageId, chunks: batch }, author);
      }
    }
  };
  let next = 0;
  await Promise.all(
    Array.from({ length: PARALLEL_SESSIONS }, async () => {
      while (next < SESSIONS) await seedSession(next++);
    }),
  );
}

/** Events per second folding the pages as the block projection does, without its reads and writes. */
async function foldAlone(eventLog: EventLogReader, pages: readonly (readonly ProjectionEvent[])[]): Promise<number> {
  const started = performance.now();
  const sessions = new Map<string, SessionState>();
  let events = 0;
  for (const page of pages) {
    const byStream = new Map<string, ProjectionEvent[]>();
    for (const event of page) {
      const own = byStream.get(event.streamId);
      if (own) own.push(event);
      else byStream.set(event.streamId, [event]);
    }
    for (const [streamId, own] of byStream) {
      const previous = sessions.get(streamId) ?? initialSessionState;
      const current = await foldSessionEvents(eventLog, previous, own, 'read');
      sessionChanges(previous, current);
      sessions.set(streamId, current);
    }
    events += page.length;
  }
  return events / ((performance.now() - started) / 1_000);
}

async function main(): Promise<void> {
  const database = await openBenchDatabase(54_394);
  const pool = new pg.Pool({ connectionString: database.connectionString, max: 8 });
  pool.on('error', () => undefined);
  const eventLog = await createPostgresEventLog({ connectionString: database.connectionString });
  try {
    // A DATABASE_URL already seeded by an earlier run is measured as it is.
    if ((await eventLog.headPosition()) === 0n) await seed(new SessionRepository(eventLog));
    const readAlone: number[] = [];
    const foldedAlone: number[] = [];
    const rebuilt: number[] = [];
    let events = 0;
    for (let run = 0; run < RUNS; run += 1) {
      let started = performance.now();
      let position = 0n;
      let read = 0;
      const pages: (readonly ProjectionEvent[])[] = [];
      for (;;) {
        const filter = { streamPrefixes: [SESSION_STREAM_PREFIX] };
        const page = await eventLog.readAllForProjections({ fromPosition: position, maxCount: REBUILD_PAGE, filter });
        read += page.events.length;
        pages.push(page.events);
        position = page.checkpoint;
        if (page.caughtUp) break;
      }
      readAlone.push(read / ((performance.now() - started) / 1_000));
      foldedAlone.push(await foldAlone(eventLog, pages));
      pages.length = 0;
      started = performance.now();
      const [{ result }] = await rebuildReadModels(pool, eventLog, ['block-read-models']);
      rebuilt.push(result.events / ((performance.now() - started) / 1_000));
      events = result.events;
    }
    const best = (rates: number[]) => Math.max(...rates);
    console.log(
      `block read models, ${events.toLocaleString('en-US')} session events (${SESSIONS} sessions × ${RESPONSES} responses); ` +
        `best of ${RUNS}; ${os.cpus().length} cores, Node ${process.version}`,
    );
    printTable(
      ['measure', 'events/s', 'vs reading the log alone'],
      [
        [
          `reading the log alone (pages of ${REBUILD_PAGE.toLocaleString('en-US')}): baseline`,
          formatRate(best(readAlone)),
          formatRatio(1),
        ],
        [
          'folding alone (the pages in memory, as the projection folds)',
          formatRate(best(foldedAlone)),
          formatRatio(best(foldedAlone) / best(readAlone)),
        ],
        ['rebuild (fold, write, swap)', formatRate(best(rebuilt)), formatRatio(best(rebuilt) / best(readAlone))],
      ],
    );
  } finally {
    await eventLog.close();
    await pool.end();
    await database.close();
  }
}

if (!(await reranWithServiceNodeFlags())) await main();
