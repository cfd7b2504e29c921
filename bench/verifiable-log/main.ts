/**
 * Verifying a 10,000-event session: the verify route (every chain link and every inclusion proof
 * against a signed checkpoint), the export, and the offline check of the bundle with the key
 * alone, each against reading the same events through the events route in the same run (the
 * baseline: what the data costs to fetch, unverified). Medians of RUNS runs.
 *
 *   npm run bench:verify
 */
import os from 'node:os';
import { verifySessionBundle } from '../../apps/ledger/src/verifiable-log/offline-verifier.js';
import {
  formatRatio,
  mintBenchKeys,
  openBenchDatabase,
  percentile,
  printTable,
  startLedgerProcess,
} from '../support/bench-database.js';
import { bearer, post } from '../support/bench-http.js';

const MESSAGES = 100;
/** Per message: message.created, llm_response_created, text.start, the deltas, text.complete: 100 events. */
const DELTAS = 96;
const RUNS = 5;

async function timed(run: () => Promise<unknown>): Promise<number> {
  const durations: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const started = performance.now();
    await run();
    durations.push(performance.now() - started);
  }
  return percentile(durations, 50);
}

async function main(): Promise<void> {
  const database = await openBenchDatabase(54_393);
  const [producer, auditor] = await mintBenchKeys(database.connectionString, [
    { name: 'bench producer', roles: ['producer'] },
    { name: 'bench auditor', roles: ['auditor'] },
  ]);
  const ledger = await startLedgerProcess(database.connectionString);
  try {
    const { id: sessionId } = await post(`${ledger.url}/v1/sessions`, {}, producer);
    for (let message = 0; message < MESSAGES; message++) {
      const { id: messageId } = await post(
        `${ledger.url}/v1/sessions/${sessionId}/messages`,
        { role: 'assistant' },
        producer,
      );
      let text = '';
      const deltas = Array.from({ length: DELTAS }, () => ({ type: 'text.delta', text: (text += ` tok${message}`) }));
      const chunks = [
        { type: 'llm_response_created' },
        { type: 'text.start' },
        ...deltas,
        { type: 'text.complete', text },
      ];
      await post(
        `${ledger.url}/v1/sessions/${sessionId}/messages/${messageId}/chunks`,
        chunks.map((chunk, i) => ({ seq: i + 1, ...chunk })),
        producer,
      );
    }
    const get = async (route: string) => {
      const response = await fetch(`${ledger.url}${route}`, { headers: bearer(auditor) });
      if (!response.ok) throw new Error(`${route}: ${response.status}`);
      return response;
    };
    const report = (await (await get(`/v1/sessions/${sessionId}/verify`)).json()) as {
      ok: boolean;
      checkedEvents: number;
      firstBroken?: unknown;
    };
    if (!report.ok) throw new Error(`the session does not verify: ${JSON.stringify(report.firstBroken)}`);
    const vkey = (await (await get('/v1/log/key')).text()).trim();
    const bundle = await (await get(`/v1/sessions/${sessionId}/export`)).text();

    const readMs = await timed(async () => {
      for (let from = 0; ;) {
        const page = (await (await get(`/v1/sessions/${sessionId}/events?from=${from}&limit=1000`)).json()) as {
          next: number | null;
        };
        if (page.next === null) return;
        from = page.next;
      }
    });
    const verifyMs = await timed(async () => (await get(`/v1/sessions/${sessionId}/verify`)).json());
    const exportMs = await timed(async () => (await get(`/v1/sessions/${sessionId}/export`)).text());
    const offlineMs = await timed(() => verifySessionBundle(bundle, vkey));

    console.log(
      `a session of ${report.checkedEvents} events, bundle ${Math.round(bundle.length / 1024)} KiB; ` +
        `${os.cpus().length} cores, Node ${process.version}`,
    );
    printTable(
      ['measure (median of 5)', 'ms', 'vs reading its events'],
      [
        ['read the events (GET …/events, pages of 1,000): baseline', readMs.toFixed(0), '1.0×'],
        [
          'GET …/verify (chains + every event against a signed checkpoint)',
          verifyMs.toFixed(0),
          formatRatio(verifyMs / readMs),
        ],
        ['GET …/export (bundle with proofs, recorded)', exportMs.toFixed(0), formatRatio(exportMs / readMs)],
        [
          'offline verify of the bundle + fold (no server, no database)',
          offlineMs.toFixed(0),
          formatRatio(offlineMs / readMs),
        ],
      ],
    );
  } finally {
    await ledger.stop();
    await database.close();
  }
}

await main();
