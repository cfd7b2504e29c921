/**
 * Where a service's CPU time went, from a V8 CPU profile (`node --cpu-prof`, or a bench run with
 * BENCH_CPU_PROF_DIR set): self time of every sampled frame, grouped into the stages of a chunk
 * POST by the file (or built-in) the frame runs in. Prints a Markdown table of ms and shares of
 * the busy time, and the idle share.
 *
 *   node dist/bench/support/profile-breakdown.js <file.cpuprofile> [units, e.g. acknowledged chunks]
 */
import { readFile } from 'node:fs/promises';
import { printTable } from './bench-database.js';

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string };
  readonly children?: readonly number[];
}

interface Profile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

/** The HTTP stack's packages, Express's (before decision 0043) and Fastify's, so profiles of either compare. */
const HTTP_PACKAGES = [
  '@nestjs',
  '@fastify',
  'fastify[a-z-]*',
  'fast-querystring',
  'fast-decode-uri-component',
  'find-my-way',
  'avvio',
  'express',
  'body-parser',
  'raw-body',
  'router',
  'on-finished',
  'finalhandler',
  'iconv-lite',
  'pino',
  'pino-http',
];

/** First match wins: more specific stages before the broad ones. */
const STAGES: readonly (readonly [string, RegExp])[] = [
  ['idle', /^\(idle\)$/],
  ['garbage collection', /^\(garbage collector\)$/],
  ['projection', /apps\/ledger\/src\/(projections|sessions\/read-models|governance\/read-models)\//],
  ['live feed (hub, SSE)', /apps\/ledger\/src\/live\//],
  ['Merkle log', /apps\/ledger\/src\/verifiable-log\//],
  ['hash, canonical JSON', /libs\/core\/src\/hashing\/|crypto\/hash/],
  ['validation (zod, chunk schemas)', /node_modules\/zod\/|libs\/core\/src\/chunks\//],
  ['decide and fold (core, repository)', /libs\/core\/src\/|apps\/ledger\/src\/sessions\//],
  ['socket writes (writev: HTTP answers and pg)', /^writev$|^writeBuffer$|^writeString$|^writeUtf8String$/],
  ['event log and pg driver (appends and reads)', /libs\/event-log\/|node_modules\/(pg|pg-[a-z]+|postgres-[a-z]+)\//],
  ['auth (guard, keys)', /apps\/ledger\/src\/identity\//],
  [
    'HTTP and parse (Nest, Fastify, Express, body parsers)',
    new RegExp(`node_modules/(${HTTP_PACKAGES.join('|')})/|node:_http|node:http`),
  ],
  [
    'Node runtime (buffers, events, streams, microtasks)',
    /node:(buffer|events|internal\/streams|net|stream)|^utf8Slice$|^runMicrotasks$/,
  ],
  ['V8 and runtime (program)', /^\(program\)$/],
];

function stageOf(frame: ProfileNode['callFrame']): string {
  for (const [stage, pattern] of STAGES) if (pattern.test(frame.url) || pattern.test(frame.functionName)) return stage;
  return 'other';
}

async function main(): Promise<void> {
  const [file, unitsArgument] = process.argv.slice(2);
  const profile = JSON.parse(await readFile(file, 'utf8')) as Profile;
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
  const microseconds = new Map<string, number>();
  profile.samples.forEach((id, index) => {
    const stage = stageOf(nodes.get(id)!.callFrame);
    microseconds.set(stage, (microseconds.get(stage) ?? 0) + (profile.timeDeltas[index] ?? 0));
  });
  const total = [...microseconds.values()].reduce((sum, value) => sum + value, 0);
  const busy = total - (microseconds.get('idle') ?? 0);
  const units = unitsArgument === undefined ? undefined : Number(unitsArgument);
  const rows = [...microseconds]
    .filter(([stage]) => stage !== 'idle')
    .sort((a, b) => b[1] - a[1])
    .map(([stage, us]) => [
      stage,
      (us / 1_000).toFixed(0),
      `${((us / busy) * 100).toFixed(1)} %`,
      units === undefined ? '—' : (us / units).toFixed(1),
    ]);
  console.log(
    `profile ${file}: ${(total / 1e6).toFixed(1)} s sampled, idle ${(((total - busy) / total) * 100).toFixed(1)} %`,
  );
  printTable(['stage', 'busy ms', 'share of busy', 'µs per unit'], rows);
}

await main();
