import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { startLedgerProcess, type LedgerProcess } from '../support/bench-database.js';

/** The key the service calls the provider double with. */
const UPSTREAM_KEY = 'sk-bench-upstream';

export interface Timing {
  readonly firstByteMs: number;
  readonly totalMs: number;
  readonly events: number;
}

export interface GatewayUnderBench {
  /** The provider double's own URL (`/v1/...`) and the header it takes. */
  readonly doubleUrl: string;
  readonly upstreamAuthorization: string;
  readonly ledger: LedgerProcess;
  stop(): Promise<void>;
}

/**
 * The provider double (provider-double-process.ts, with `doubleEnv`) and the service, each a process of its own, the
 * service's gateway calling the double for every model.
 */
export async function startGatewayUnderBench(
  databaseUrl: string,
  doubleEnv: Record<string, string>,
): Promise<GatewayUnderBench> {
  const double = await startDoubleProcess(doubleEnv);
  const folder = await mkdtemp(path.join(tmpdir(), 'bench-gateway-'));
  const upstreamsFile = path.join(folder, 'upstreams.json');
  const upstream = {
    name: 'double',
    protocol: 'openai',
    baseUrl: `${double.baseUrl}/v1`,
    models: '*',
    keys: [{ key: UPSTREAM_KEY }],
  };
  await writeFile(upstreamsFile, JSON.stringify({ upstreams: [upstream] }));
  const ledger = await startLedgerProcess(databaseUrl, { LEDGER_UPSTREAMS: upstreamsFile });
  return {
    doubleUrl: double.baseUrl,
    upstreamAuthorization: `Bearer ${UPSTREAM_KEY}`,
    ledger,
    stop: async () => {
      await ledger.stop();
      double.stop();
      await rm(folder, { recursive: true, force: true });
    },
  };
}

/** One streamed chat completion: when its first body byte came, when it ended, how many SSE events it held. */
export async function stream(url: string, headers: Record<string, string>, model = 'gpt-bench'): Promise<Timing> {
  const started = performance.now();
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({
      model,
      stream: true,
      messages: [{ role: 'user', content: 'Stream me something.' }],
    }),
  });
  if (!response.ok || !response.body) throw new Error(`${url}: ${response.status} ${await response.text()}`);
  let firstByteMs = -1;
  let events = 0;
  let tail = '';
  const decoder = new TextDecoder();
  for await (const bytes of response.body) {
    if (firstByteMs < 0) firstByteMs = performance.now() - started;
    // Frames are counted as they end, so a long answer is never held whole.
    const frames = (tail + decoder.decode(bytes, { stream: true })).split('\n\n');
    tail = frames.pop()!;
    events += frames.filter((frame) => frame.startsWith('data:')).length;
  }
  if (tail.startsWith('data:')) events += 1;
  return { firstByteMs, totalMs: performance.now() - started, events };
}

async function startDoubleProcess(env: Record<string, string>): Promise<{ baseUrl: string; stop(): void }> {
  const child = spawn(process.execPath, [path.resolve('dist/bench/gateway/provider-double-process.js')], {
    env: { ...process.env, BENCH_KEYS: UPSTREAM_KEY, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const line = (await lines.next()).value as string;
  const { baseUrl } = JSON.parse(line) as { baseUrl: string };
  return { baseUrl, stop: () => void child.kill('SIGTERM') };
}
