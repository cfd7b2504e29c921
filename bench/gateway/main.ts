/**
 * The recording gateway's cost to a streaming client: time to first byte and total time of an
 * OpenAI Chat Completions stream through the gateway against the same stream straight from the
 * provider double, in the same run, at 1 and at 200 concurrent streams. The double, the service
 * and this client are three processes. Waves alternate direct and gateway so both see the same
 * noise. At the end, every provider event the gateway relayed must be in the log.
 *
 *   npm run bench:gateway
 */
import pg from 'pg';
import { mintBenchKeys, openBenchDatabase, percentile, printTable } from '../support/bench-database.js';
import { startGatewayUnderBench, stream, type Timing } from './gateway-under-bench.js';

const EVENTS_PER_STREAM = 60;
// A model streaming about 50 tokens a second.
const EVENT_DELAY_MS = 20;
const LEVELS = [
  { streams: 1, waves: 100 },
  { streams: 200, waves: 3 },
];

async function main(): Promise<void> {
  const database = await openBenchDatabase(54_393);
  const [producerKey] = await mintBenchKeys(database.connectionString, [
    { name: 'bench gateway producer', roles: ['producer'] },
  ]);
  const gatewayUnderBench = await startGatewayUnderBench(database.connectionString, {
    BENCH_EVENTS: String(EVENTS_PER_STREAM),
    BENCH_DELAY_MS: String(EVENT_DELAY_MS),
  });
  const { doubleUrl, upstreamAuthorization, ledger } = gatewayUnderBench;
  let relayedEvents = 0;
  try {
    const rows: string[][] = [];
    for (const { streams, waves } of LEVELS) {
      const direct: Timing[] = [];
      const gateway: Timing[] = [];
      // An agent per stream, each on its own session: its first call opens it, the next ones regenerate the answer.
      const sessions = Array.from({ length: streams }, () => `bench-${crypto.randomUUID()}`);
      for (let wave = 0; wave < waves; wave += 1) {
        direct.push(
          ...(await wavesOf(sessions, () =>
            stream(`${doubleUrl}/v1/chat/completions`, { authorization: upstreamAuthorization }),
          )),
        );
        const through = await wavesOf(sessions, (sessionId) =>
          stream(`${ledger.url}/gateway/openai/v1/chat/completions`, {
            authorization: `Bearer ${producerKey}`,
            'x-ledger-session': sessionId,
          }),
        );
        relayedEvents += through.reduce((sum, timing) => sum + timing.events, 0);
        gateway.push(...through);
      }
      rows.push(...report(streams, direct, gateway));
    }
    printTable(
      ['streams', 'measure', 'direct p50', 'gateway p50', 'added p50', 'direct p99', 'gateway p99', 'added p99'],
      rows,
    );
    const recorded = await recordedProviderEvents(database.connectionString);
    const verdict = recorded === relayedEvents ? 'every one' : 'MISSING SOME';
    console.log(
      `\nprovider events relayed through the gateway: ${relayedEvents}; recorded in the log: ${recorded} (${verdict})`,
    );
  } finally {
    await gatewayUnderBench.stop();
    await database.close();
  }
}

function report(streams: number, direct: readonly Timing[], gateway: readonly Timing[]): string[][] {
  const ms = (value: number) => `${value.toFixed(2)} ms`;
  return (['firstByteMs', 'totalMs'] as const).map((measure) => {
    const [d50, g50, d99, g99] = [
      percentile(
        direct.map((timing) => timing[measure]),
        50,
      ),
      percentile(
        gateway.map((timing) => timing[measure]),
        50,
      ),
      percentile(
        direct.map((timing) => timing[measure]),
        99,
      ),
      percentile(
        gateway.map((timing) => timing[measure]),
        99,
      ),
    ];
    const label = measure === 'firstByteMs' ? 'time to first byte' : 'total time';
    return [String(streams), label, ms(d50), ms(g50), ms(g50 - d50), ms(d99), ms(g99), ms(g99 - d99)];
  });
}

function wavesOf(sessions: readonly string[], one: (sessionId: string) => Promise<Timing>): Promise<Timing[]> {
  return Promise.all(sessions.map(one));
}

/** Provider events the log holds: the first chunk event of each carries the event as its source. */
async function recordedProviderEvents(connectionString: string): Promise<number> {
  const client = new pg.Client({ connectionString });
  await client.connect();
  try {
    const { rows } = await client.query<{ count: string }>(
      "SELECT count(*) FROM event_log_events WHERE data->'source' ? 'event'",
    );
    return Number(rows[0].count);
  } finally {
    await client.end();
  }
}

await main();
