/**
 * The console showing a 2,000-block session (1,000 answers of a thinking and a text block each):
 * from navigation to the chat's first blocks on screen and the live feed connected, in a real
 * Chromium, beside the baseline of the same page load fetching the session's JSON (the read the
 * view renders). Also how many rows are in the DOM: the list is virtualized. Medians of RUNS loads.
 *
 *   npm run bench:console
 */
import os from 'node:os';
import { openBrowser } from '../../test/support/browser.js';
import {
  formatRatio,
  mintBenchKeys,
  openBenchDatabase,
  percentile,
  printTable,
  startLedgerProcess,
} from '../support/bench-database.js';
import { post } from '../support/bench-http.js';

const ANSWERS = 1_000;
const RUNS = 5;

async function main(): Promise<void> {
  const database = await openBenchDatabase(54_457);
  const [producer, reviewer] = await mintBenchKeys(database.connectionString, [
    { name: 'bench producer', roles: ['producer'] },
    { name: 'bench reviewer', roles: ['reader', 'reviewer'] },
  ]);
  const ledger = await startLedgerProcess(database.connectionString);
  const browser = await openBrowser();
  try {
    const { id: sessionId } = (await post(`${ledger.url}/v1/sessions`, { title: 'two thousand blocks' }, producer)) as {
      id: string;
    };
    const messages = `${ledger.url}/v1/sessions/${sessionId}/messages`;
    for (let answer = 0; answer < ANSWERS; answer++) {
      const { id } = (await post(messages, { role: 'assistant', model: 'bench' }, producer)) as { id: string };
      const chunks = [
        { type: 'llm_response_created' },
        { type: 'thinking.start' },
        { type: 'thinking.complete', text: `thinking about ${answer}`, thinking_millsec: 300 },
        { type: 'text.start' },
        { type: 'text.complete', text: `Answer **${answer}** with a [link](https://example.com) and \`code\`.` },
        { type: 'block_complete' },
      ];
      await post(
        `${messages}/${id}/chunks`,
        chunks.map((chunk, seq) => ({ seq: seq + 1, ...chunk })),
        producer,
      );
    }
    const { page } = browser;
    await page.goto(`${ledger.url}/console`);
    await page.getByLabel('API key').fill(reviewer);
    await page.keyboard.press('Enter');
    await page.getByTestId('who').waitFor();

    const shown: number[] = [];
    const chat: number[] = [];
    const fetched: number[] = [];
    let rowsInDom = 0;
    for (let run = 0; run < RUNS; run++) {
      await page.goto(`${ledger.url}/console/sessions/${sessionId}`);
      await page.getByRole('region', { name: 'Conversation' }).getByText('Answer', { exact: false }).first().waitFor();
      const chatMs = await page.evaluate<number>('performance.now()');
      await page.getByText('live', { exact: true }).waitFor();
      chat.push(chatMs);
      const timings = await page.evaluate<{ shownMs: number; fetchedMs: number; rows: number }>(`(() => {
        const read = performance.getEntriesByType('resource').find((entry) => /\\/v1\\/sessions\\/[^/?]+$/.test(entry.name));
        return { shownMs: performance.now(), fetchedMs: read ? read.responseEnd : NaN,
          rows: document.querySelectorAll('.chat .virtual-row').length };
      })()`);
      shown.push(timings.shownMs);
      fetched.push(timings.fetchedMs);
      rowsInDom = timings.rows;
    }
    const shownMs = percentile(shown, 50);
    const chatMs = percentile(chat, 50);
    const fetchedMs = percentile(fetched, 50);
    console.log(
      `a session of ${ANSWERS} answers, ${ANSWERS * 2} blocks (${ANSWERS * 3} rows); ` +
        `${os.cpus().length} cores, Node ${process.version}, Chromium headless 1280×800`,
    );
    printTable(
      ['measure (median of 5 page loads, from navigation)', 'ms', 'vs its read'],
      [
        ['the session read (GET /v1/sessions/:sid) done in the page: baseline', fetchedMs.toFixed(0), '1.0×'],
        ['the chat on screen (first blocks rendered)', chatMs.toFixed(0), formatRatio(chatMs / fetchedMs)],
        ['… and the live feed connected', shownMs.toFixed(0), formatRatio(shownMs / fetchedMs)],
        [`rows in the DOM (of ${ANSWERS * 3})`, String(rowsInDom), ''],
      ],
    );
  } finally {
    await browser.close();
    await ledger.stop();
    await database.close();
  }
}

await main();
