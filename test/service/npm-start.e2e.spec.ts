import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { SERVICE_NODE_FLAGS } from '../../apps/ledger/src/config/node-flags.js';
import { freePort, reachableTempDir, startService, waitUntilHealthy } from '../support/service-process.js';

const MAIN = path.resolve('dist/apps/ledger/src/main.js');

/** Processes whose command line or environment mentions `text` (Linux /proc; other users' environments are skipped). */
function processesMentioning(text: string): string[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry) && Number(entry) !== process.pid)
    .filter((pid) =>
      ['cmdline', 'environ'].some((part) => {
        try {
          return readFileSync(`/proc/${pid}/${part}`, 'utf8').includes(text);
        } catch {
          return false;
        }
      }),
    );
}

function commandLine(pid: string): string[] {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  } catch {
    return [];
  }
}

describe('npm start', () => {
  let dataDir: string;
  beforeAll(async () => {
    dataDir = await reachableTempDir('npm-start');
  });
  afterAll(async () => {
    await rm(dataDir, { recursive: true, force: true });
  });

  it('skips an up-to-date build, and a SIGTERM to npm stops the service and its PostgreSQL', async () => {
    // The build made up to date first: npm start's own build must then leave every output as it is.
    execFileSync('npm', ['run', 'build'], { stdio: 'ignore' });
    const builtAt = statSync(MAIN).mtimeMs;
    const pgPort = String(await freePort());
    const service = startService({ PORT: String(await freePort()), LEDGER_DATA_DIR: dataDir, LEDGER_PG_PORT: pgPort }, [
      'npm',
      'start',
    ]);
    await waitUntilHealthy(service);
    expect(statSync(MAIN).mtimeMs).toBe(builtAt);
    // The service (its environment names the data folder) and PostgreSQL (its command line does).
    expect(processesMentioning(dataDir).length).toBeGreaterThanOrEqual(2);
    // The service runs with its V8 flags (decision 0034).
    const serviceCommand = processesMentioning(dataDir)
      .map((pid) => commandLine(pid))
      .find((args) => args.at(-1) === 'dist/apps/ledger/src/main.js');
    expect(serviceCommand?.slice(1)).toEqual([...SERVICE_NODE_FLAGS, 'dist/apps/ledger/src/main.js']);

    service.child.kill('SIGTERM');
    await service.exited;
    expect(service.output()).toContain('block-ledger: SIGTERM received, shutting down');
    expect(processesMentioning(dataDir)).toEqual([]);
    // PostgreSQL stopped cleanly: its lock on the data folder is released.
    expect(existsSync(path.join(dataDir, 'postgres', 'postmaster.pid'))).toBe(false);
  }, 180_000);
});
