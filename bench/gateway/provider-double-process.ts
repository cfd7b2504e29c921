/**
 * The provider double in a process of its own, so its CPU does not count against the gateway:
 * prints `{"baseUrl": …}` on its first line, then serves until killed. Every call streams
 * `BENCH_EVENTS` text deltas, `BENCH_DELAY_MS` apart, as a model would.
 */
import { startProviderDouble } from '../../test/support/provider-doubles/index.js';

const keys = (process.env.BENCH_KEYS ?? 'bench-key').split(',');
const events = Number(process.env.BENCH_EVENTS ?? 50);
const delayMs = Number(process.env.BENCH_DELAY_MS ?? 2);

const double = await startProviderDouble({ keys });
const text = Array.from({ length: events }, (_, index) => `w${index % 10} `).join('');
double.script(() => ({ text, chunkChars: 3, chunkDelayMs: delayMs }));
process.stdout.write(`${JSON.stringify({ baseUrl: double.baseUrl })}\n`);
process.on('SIGTERM', () => void double.close().then(() => process.exit(0)));
