import { spawn } from 'node:child_process';
import path from 'node:path';
import type pg from 'pg';
import { formatRate, formatRatio, percentile, printTable } from '../support/bench-database.js';
import { corePercent, mainThread, postmasterPid, processTicks, processTreeTicks } from '../support/process-cpu.js';
import { postgresCounters, statementsCounted, statementsPerUnit } from '../support/postgres-counters.js';
import { startFloorService } from './floor-service.js';
import type { FleetConfig, FleetResult } from './fleet-process.js';

const FLEET_SIZES = (process.env.BENCH_FLEET_SIZES ?? '100,250,500').split(',').map(Number);
const FLEET_SECONDS = Number(process.env.BENCH_FLEET_SECONDS ?? 15);
/** A model streaming about 40 tokens a second, a delta per token. */
const CHUNKS_PER_SECOND = 40;
/**
 * Seconds of fleet load, not measured, that the ledger and the naive service each take at the first size before the
 * measured runs: in its first seconds a service's compiler threads take 12–20 % of a core, and a service in use has
 * long finished compiling (issue 15's thirty-fourth round).
 */
const WARM_UP_SECONDS = Number(process.env.BENCH_FLEET_WARM_UP_SECONDS ?? 15);
/** Statements below this many calls per POST are left out of the list. */
const LISTED_CALLS_PER_POST = 0.01;
interface Measured {
  readonly fleet: FleetResult;
  readonly serviceCpu: number;
  /** The services' main threads: what one thread can give is the bound. */
  readonly mainThreadCpu: number;
  /** Percent of the load window the services' main threads spent runnable, waiting for a core. */
  readonly mainThreadWaiting: number;
  readonly postgresCpu: number;
  /** The load generator's own process: with the service and PostgreSQL, what is left of the machine. */
  readonly loadCpu: number;
  readonly perPost: { transactions: number; fetched: number; statements: number | undefined };
}

/**
 * Runs the load generator and prints the errors it met under `label`; `onPhase` hears when its load starts and ends
 * (setup and draining excluded), and its pid.
 */
async function runFleetProcess(
  config: FleetConfig,
  label: string,
  onPhase: (phase: string, pid: number) => void = () => undefined,
): Promise<FleetResult> {
  const child = spawn(process.execPath, [path.resolve('dist/bench/ingest/fleet-process.js'), JSON.stringify(config)], {
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
  });
  child.on('message', (phase) => onPhase(phase as string, child.pid!));
  let output = '';
  child.stdout!.on('data', (part: Buffer) => (output += part.toString()));
  const fleet = await new Promise<FleetResult>((resolve, reject) =>
    child.once('exit', (code) =>
      code === 0 ? resolve(JSON.parse(output) as FleetResult) : reject(new Error(`fleet process exited ${code}`)),
    ),
  );
  for (const error of fleet.errors) console.error(`${config.target} ${label}: ${error}`);
  return fleet;
}

async function measure(
  sql: pg.Client,
  statementsLoaded: boolean,
  pids: { services: readonly number[]; postgres: number },
  config: FleetConfig,
): Promise<Measured> {
  const servicesTicks = async () =>
    (await Promise.all(pids.services.map((pid) => processTicks(pid)))).reduce((sum, ticks) => sum + ticks, 0);
  const mainThreads = async () =>
    (await Promise.all(pids.services.map((pid) => mainThread(pid)))).reduce(
      (sum, thread) => ({ ticks: sum.ticks + thread.ticks, waitingNs: sum.waitingNs + thread.waitingNs }),
      { ticks: 0, waitingNs: 0 },
    );
  const before = await postgresCounters(sql, statementsLoaded);
  // CPU is read over the load window only: averaged over setup and the drain, a saturated
  // service looked a third busy (issue 15's third round).
  type Reading = { service: number; main: { ticks: number; waitingNs: number }; postgres: number; load: number };
  const readings = new Map<string, Promise<Reading & { at: number }>>();
  const read = async (loadPid: number) => {
    const at = performance.now();
    const [service, main, postgres, load] = await Promise.all([
      servicesTicks(),
      mainThreads(),
      processTreeTicks(pids.postgres),
      processTicks(loadPid),
    ]);
    return { service, main, postgres, load, at };
  };
  const fleet = await runFleetProcess(config, `fleet of ${config.sessions}`, (phase, loadPid) =>
    readings.set(phase, read(loadPid)),
  );
  const [start, end] = await Promise.all([readings.get('load-started'), readings.get('load-ended')]);
  if (!start || !end) throw new Error('the fleet process did not report its load window');
  const serviceCpu = corePercent(end.service - start.service, end.at - start.at);
  const mainThreadCpu = corePercent(end.main.ticks - start.main.ticks, end.at - start.at);
  const mainThreadWaiting = ((end.main.waitingNs - start.main.waitingNs) / 1e6 / (end.at - start.at)) * 100;
  const postgresCpu = corePercent(end.postgres - start.postgres, end.at - start.at);
  const loadCpu = corePercent(end.load - start.load, end.at - start.at);
  const after = await postgresCounters(sql, statementsLoaded);
  const posts = fleet.chunkPosts + fleet.setupPosts;
  return {
    fleet,
    serviceCpu,
    mainThreadCpu,
    mainThreadWaiting,
    postgresCpu,
    loadCpu,
    perPost: {
      transactions: (after.transactions - before.transactions) / posts,
      fetched: (after.fetched - before.fetched) / posts,
      statements: after.statements === undefined ? undefined : (after.statements - before.statements!) / posts,
    },
  };
}

const pair = (values: readonly number[]) =>
  values.length === 0 ? '—' : `${percentile(values, 50).toFixed(1)} / ${percentile(values, 99).toFixed(1)}`;

/**
 * Each fleet size against both services and the floor (floor-service.ts), then which statements
 * the ledger ran per POST at the largest. With `startSecondLedger`, the ledger's fleet also runs
 * against two instances on the same database at once, sessions split between them, in the same
 * run; the second instance runs only for that row (idle, it would still compete for its
 * consumers' locks).
 */
export async function runFleetComparison(options: {
  sql: pg.Client;
  ledger: { url: string; pid: number };
  /** Starts another instance on the same database, for the two-process rows only. */
  startSecondLedger?: () => Promise<{ url: string; pid: number; stop(): Promise<void> }>;
  naive: { url: string };
  keys: readonly string[];
}): Promise<{ ledgerChunks: number }> {
  const { sql, ledger, startSecondLedger, naive, keys } = options;
  const statementsLoaded = await statementsCounted(sql);
  const postgres = await postmasterPid(sql);
  const table: string[][] = [];
  let ledgerChunks = 0;
  if (WARM_UP_SECONDS > 0) {
    const warmUp = {
      sessions: FLEET_SIZES[0],
      durationMs: WARM_UP_SECONDS * 1_000,
      chunksPerSecond: CHUNKS_PER_SECOND,
    };
    const ledgerWarmUp = await runFleetProcess({ target: 'ledger', keys, urls: [ledger.url], ...warmUp }, 'warm-up');
    ledgerChunks += ledgerWarmUp.acknowledgedChunks;
    await runFleetProcess({ target: 'naive', keys: [], urls: [naive.url], ...warmUp }, 'warm-up');
  }
  for (const sessions of FLEET_SIZES) {
    const shape = { sessions, durationMs: FLEET_SECONDS * 1_000, chunksPerSecond: CHUNKS_PER_SECOND };
    if (statementsLoaded) await sql.query('SELECT pg_stat_statements_reset()');
    const ledgerRun = { target: 'ledger', keys, ...shape } as const;
    const ours = await measure(
      sql,
      statementsLoaded,
      { services: [ledger.pid], postgres },
      {
        ...ledgerRun,
        urls: [ledger.url],
      },
    );
    ledgerChunks += ours.fleet.acknowledgedChunks;
    const posts = ours.fleet.chunkPosts + ours.fleet.setupPosts;
    const statementsPerPost = statementsLoaded ? await statementsPerUnit(sql, posts, LISTED_CALLS_PER_POST) : [];
    const secondLedger = await startSecondLedger?.();
    const twoInstances = secondLedger
      ? await measure(
          sql,
          statementsLoaded,
          { services: [ledger.pid, secondLedger.pid], postgres },
          {
            ...ledgerRun,
            urls: [ledger.url, secondLedger.url],
          },
        ).finally(() => secondLedger.stop())
      : undefined;
    ledgerChunks += twoInstances?.fleet.acknowledgedChunks ?? 0;
    // The naive service runs in the bench's own process: its CPU is not the service's column.
    const baseline = await measure(
      sql,
      statementsLoaded,
      { services: [process.pid], postgres },
      {
        target: 'naive',
        urls: [naive.url],
        keys: [],
        ...shape,
      },
    );
    // The floor gets the naive service's load (no setup, no lag probes): what is left for any service.
    const floorService = await startFloorService();
    const floor = await measure(
      sql,
      statementsLoaded,
      { services: [floorService.pid], postgres },
      { target: 'naive', urls: [floorService.url], keys: [], ...shape },
    ).finally(() => floorService.stop());
    const runs: [string, Measured][] = [['block-ledger', ours]];
    if (twoInstances) runs.push(['block-ledger, 2 processes', twoInstances]);
    runs.push(['naive service', baseline], ['floor: answers, stores nothing', floor]);
    for (const [name, run] of runs) {
      // Offered over the run's window; acknowledged over the run until its last answer.
      const seconds = run.fleet.elapsedMs / 1_000;
      table.push([
        String(sessions),
        name,
        formatRate(run.fleet.offeredChunks / FLEET_SECONDS),
        formatRate(run.fleet.acknowledgedChunks / seconds),
        formatRatio(
          run.fleet.acknowledgedChunks /
            seconds /
            (baseline.fleet.acknowledgedChunks / (baseline.fleet.elapsedMs / 1_000)),
        ),
        pair(run.fleet.ackMs),
        pair(run.fleet.projectionLagMs),
        pair(run.fleet.liveLagMs),
        `${run.serviceCpu.toFixed(0)} / ${run.postgresCpu.toFixed(0)} / ${run.loadCpu.toFixed(0)}`,
        `${run.mainThreadCpu.toFixed(0)} / ${run.mainThreadWaiting.toFixed(0)}`,
        `${run.perPost.transactions.toFixed(2)} / ${run.perPost.statements?.toFixed(2) ?? 'n/a'} / ${run.perPost.fetched.toFixed(1)}`,
        String(run.fleet.failures),
      ]);
    }
    if (statementsPerPost.length > 0) {
      console.log(`statements per POST, block-ledger fleet of ${sessions} (pg_stat_statements, by source):`);
      printTable(['calls / POST', 'source', 'statement'], statementsPerPost);
      console.log();
    }
  }
  console.log(
    `open-loop fleet: ${FLEET_SECONDS} s per run, ~400-chunk messages at ~${CHUNKS_PER_SECOND} chunks/s per session, ` +
      `a POST every 50–100 ms; a new session when one ends; after ${WARM_UP_SECONDS} s of unmeasured load on each service`,
  );
  printTable(
    [
      'sessions',
      'service',
      'offered chunks/s',
      'acknowledged chunks/s',
      'ack vs naive',
      'ack p50 / p99 ms',
      'projection lag p50 / p99 ms',
      'live lag p50 / p99 ms',
      'CPU % service / PostgreSQL / load generator',
      "service's main thread: CPU % / waiting for a core %",
      'per POST: transactions / statements / tuples fetched',
      'failures',
    ],
    table,
  );
  return { ledgerChunks };
}
