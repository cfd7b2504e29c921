/**
 * What a session's length costs each batch that comes to it. Every batch of a session is folded
 * onto its cached state three times in the service (the decision, the block projection, the live
 * hub), and the projection and the live hub then take the change set between the two states, and
 * the projection the session's summary (its row in the session list). A session of thousands of
 * messages (a long agent run) must not make each of those cost its length.
 *
 * In process, on the core alone: a session of MESSAGES messages (user and assistant turns, each
 * answer a text block), then TURNS more turns, each its own batches as a producer posts them
 * (the user message, the assistant message, then 20 text deltas), folded for deciding and for
 * reading, with the change set and the summary. Baseline in the same run: the same turns on a
 * session of 10 messages. Runs with the service's V8 flags.
 *
 *   npm run bench:long-sessions        BENCH_MESSAGES=1000,5000 BENCH_TURNS=200 by default
 */
import {
  decideSession,
  evolveSessionEvents,
  initialSessionState,
  sessionChanges,
  summarizeChanges,
  summarizeSession,
  type SessionCommand,
  type SessionEventEnvelope,
  type SessionState,
  type SessionTally,
} from '#core';
import { formatRatio, printTable, reranWithServiceNodeFlags } from '../support/bench-database.js';

const LENGTHS = (process.env.BENCH_MESSAGES ?? '1000,5000').split(',').map(Number);
const TURNS = Number(process.env.BENCH_TURNS ?? 200);
const BASELINE_MESSAGES = 10;
const DELTAS_PER_ANSWER = 20;
const RUNS = 3;
const recordedAt = '2026-01-01T00:00:00.000Z';

/** A session as the service holds it: each batch decided on the state, then folded onto it. */
class HeldSession {
  private position = 0n;
  state: SessionState = initialSessionState;
  /** The projection's summary of the session, made batch by batch as it makes it. */
  private summary: SessionTally | undefined;

  /** The command's events as the log would hand them back. */
  decide(command: SessionCommand): SessionEventEnvelope[] {
    return decideSession(command, this.state).events.map(({ event }) => {
      this.position += 1n;
      return { ...event, position: this.position, recordedAt };
    });
  }

  /** One batch as the service takes it: the decision's fold, then the reading fold, its change set and the summary. */
  take(events: readonly SessionEventEnvelope[]): void {
    const decided = evolveSessionEvents(this.state, events, 'decide');
    const read = evolveSessionEvents(this.state, events, 'read');
    const changes = sessionChanges(this.state, read);
    if (!changes) throw new Error('a batch that changes nothing');
    this.summary = this.summary ? summarizeChanges(this.summary, changes) : summarizeSession(changes.session);
    this.state = decided;
  }
}

/** The batches of one turn: the user's message, the assistant's, and its answer in deltas. */
function* turn(session: HeldSession, index: number): Generator<SessionEventEnvelope[]> {
  const create = (messageId: string, role: 'user' | 'assistant'): SessionCommand => ({
    type: 'create_message',
    messageId,
    role,
    parentId: undefined,
    model: role === 'assistant' ? 'bench-model' : null,
    content: role === 'user' ? `question ${index}` : null,
  });
  yield session.decide(create(`u${index}`, 'user'));
  yield session.decide(create(`a${index}`, 'assistant'));
  let text = '';
  for (let delta = 0; delta < DELTAS_PER_ANSWER; delta += 1) {
    text += ` word${delta}`;
    yield session.decide({
      type: 'append_chunks',
      messageId: `a${index}`,
      chunks: [{ seq: delta + 1, type: 'text.delta', text }],
    });
  }
}

function sessionOf(messages: number): HeldSession {
  const session = new HeldSession();
  const open = session.decide({
    type: 'open_session',
    sessionId: 'bench',
    title: null,
    metadata: {},
    owner: 'bench',
    writers: [],
  });
  session.state = evolveSessionEvents(session.state, open);
  for (let index = 0; index < messages / 2; index += 1)
    for (const batch of turn(session, index)) session.state = evolveSessionEvents(session.state, batch);
  return session;
}

/** µs per batch for TURNS turns on a session of `messages` messages. */
function measure(messages: number): number {
  // Decided up front on a session of its own; then taken as the service takes them, timed.
  const session = sessionOf(messages);
  const batches: SessionEventEnvelope[][] = [];
  for (let index = 0; index < TURNS; index += 1) {
    for (const batch of turn(session, messages + index)) {
      session.state = evolveSessionEvents(session.state, batch);
      batches.push(batch);
    }
  }
  const replay = sessionOf(messages);
  const started = performance.now();
  for (const batch of batches) replay.take(batch);
  return ((performance.now() - started) * 1_000) / batches.length;
}

async function main(): Promise<void> {
  if (await reranWithServiceNodeFlags()) return;
  const rows: string[][] = [];
  for (let run = 1; run <= RUNS; run += 1) {
    const baseline = measure(BASELINE_MESSAGES);
    rows.push([String(run), String(BASELINE_MESSAGES), baseline.toFixed(1), formatRatio(1)]);
    for (const messages of LENGTHS) {
      const perBatch = measure(messages);
      rows.push([String(run), messages.toLocaleString('en-US'), perBatch.toFixed(1), formatRatio(perBatch / baseline)]);
    }
  }
  console.log(`${TURNS} turns of ${DELTAS_PER_ANSWER + 2} batches each, on sessions of each length:`);
  printTable(['run', 'messages before', 'µs per batch', 'vs 10 messages'], rows);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
