/**
 * The provider double in a process of its own, so its CPU does not count against the gateway:
 * prints `{"baseUrl": …}` on its first line, then serves until killed. Every call streams
 * `BENCH_EVENTS` text deltas, `BENCH_DELAY_MS` apart, as a model would; a call for the model
 * `answer-<bytes>` streams prose of that many bytes instead, in deltas of `BENCH_CHUNK_CHARS`.
 */
import { prose } from '../support/prose.js';
import { startProviderDouble } from '../../test/support/provider-doubles/index.js';

const keys = (process.env.BENCH_KEYS ?? 'bench-key').split(',');
const events = Number(process.env.BENCH_EVENTS ?? 50);
const delayMs = Number(process.env.BENCH_DELAY_MS ?? 2);
const chunkChars = Number(process.env.BENCH_CHUNK_CHARS ?? 1024);

const double = await startProviderDouble({ keys });
const text = Array.from({ length: events }, (_, index) => `w${index % 10} `).join('');
const answers = new Map<number, string>();
double.script((request) => {
  const answerBytes = /^answer-(\d+)$/.exec(String(request.body?.model))?.[1];
  if (answerBytes === undefined) return { text, chunkChars: 3, chunkDelayMs: delayMs };
  const bytes = Number(answerBytes);
  if (!answers.has(bytes)) answers.set(bytes, prose(bytes, bytes));
  return { text: answers.get(bytes), chunkChars, chunkDelayMs: delayMs };
});
process.stdout.write(`${JSON.stringify({ baseUrl: double.baseUrl })}\n`);
process.on('SIGTERM', () => void double.close().then(() => process.exit(0)));
