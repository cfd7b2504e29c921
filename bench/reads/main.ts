/**
 * What read-your-writes costs the read path (issue 17): GET /v1/sessions/:sid/messages/:mid against
 * the service as its own process, in rounds interleaved so warm-up and garbage collection fall on
 * all rows alike:
 *   - idle, other key: a key that never wrote reads (no wait: the read path as it was);
 *   - idle, own key: the writing key reads long after its write (the wait is one comparison);
 *   - after a write, other key: a chunk POST, then at once a read by another key (no wait; may be stale);
 *   - after a write, own key: the same with the writing key (waits until the read models hold the write);
 *   - after a write, ?minPosition: another key passes the write's position (the explicit way, any instance).
 * Prints the median and p95 of the read's own time (not the POST's), its ratio to the first row,
 * and how many reads right after a write missed it.
 *
 *   npm run build && node dist/bench/reads/main.js
 */
import {
  mintBenchKeys,
  openBenchDatabase,
  percentile,
  printTable,
  startLedgerProcess,
} from '../support/bench-database.js';
import { bearer, post } from '../support/bench-http.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 20);
const READS_PER_ROUND = Number(process.env.BENCH_READS ?? 50);

interface Row {
  readonly name: string;
  /** Runs before the timed read (untimed); returns the position the read must reflect, if it follows a write. */
  prepare(): Promise<number | undefined>;
  readonly key: string;
  readonly minPosition: boolean;
  readonly times: number[];
  stale: number;
}

async function main(): Promise<void> {
  const database = await openBenchDatabase(54_394);
  const [writer, reader] = await mintBenchKeys(database.connectionString, [
    { name: 'bench-writer', roles: ['producer'] },
    { name: 'bench-reader', roles: ['reader'] },
  ]);
  const ledger = await startLedgerProcess(database.connectionString);
  try {
    const { id: sessionId } = (await post(`${ledger.url}/v1/sessions`, {}, writer)) as { id: string };
    await post(`${ledger.url}/v1/sessions/${sessionId}/messages`, { id: 'a1', role: 'assistant' }, writer);
    const chunks = `${ledger.url}/v1/sessions/${sessionId}/messages/a1/chunks`;
    let seq = 0;
    const write = async () => {
      seq += 1;
      const chunk = seq === 1 ? { type: 'text.start' } : { type: 'text.delta', text: `step ${seq}` };
      return ((await post(chunks, [{ seq, ...chunk }], writer)) as { position: number }).position;
    };
    const idle = () => Promise.resolve(undefined);
    const row = (name: string, key: string, prepare: Row['prepare'], minPosition = false): Row => ({
      name,
      key,
      prepare,
      minPosition,
      times: [],
      stale: 0,
    });
    const rows = [
      row('idle, other key', reader, idle),
      row('idle, own key', writer, idle),
      row('after a write, other key', reader, write),
      row('after a write, own key', writer, write),
      row('after a write, ?minPosition', reader, write, true),
    ];
    await write();
    for (let round = -1; round < ROUNDS; round += 1) {
      for (const subject of rows) {
        for (let read = 0; read < READS_PER_ROUND; read += 1) {
          const position = await subject.prepare();
          const query = subject.minPosition && position !== undefined ? `?minPosition=${position}` : '';
          const started = performance.now();
          const response = await fetch(`${ledger.url}/v1/sessions/${sessionId}/messages/a1${query}`, {
            headers: bearer(subject.key),
          });
          const message = (await response.json()) as { lastSeq: number };
          const micros = (performance.now() - started) * 1_000;
          if (round < 0) continue; // Round -1 warms up.
          subject.times.push(micros);
          if (position !== undefined && message.lastSeq < seq) subject.stale += 1;
        }
      }
    }
    const baseline = percentile(rows[0].times, 50);
    printTable(
      ['read', 'median µs', 'p95 µs', 'ratio to idle, other key', 'missed the write'],
      rows.map((subject) => [
        subject.name,
        Math.round(percentile(subject.times, 50)).toString(),
        Math.round(percentile(subject.times, 95)).toString(),
        `${(percentile(subject.times, 50) / baseline).toFixed(2)}×`,
        subject.name.startsWith('after') ? `${subject.stale} of ${subject.times.length}` : '',
      ]),
    );
  } finally {
    await ledger.stop();
    await database.close();
  }
}

await main();
