import { execFile } from 'node:child_process';
import path from 'node:path';

/** The built command line (`npm test` builds first). */
const CLI = path.resolve('dist/apps/ledger/src/cli.js');

export interface CliRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** `node dist/apps/ledger/src/cli.js …args` on the database at `databaseUrl`, with the ledger's data folder `dataDir`. */
export function runCli(args: readonly string[], databaseUrl: string, dataDir?: string): Promise<CliRun> {
  const env = {
    ...process.env,
    DATABASE_URL: databaseUrl,
    LOG_LEVEL: 'silent',
    ...(dataDir === undefined ? {} : { LEDGER_DATA_DIR: dataDir }),
  };
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { env }, (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code) : 0, stdout, stderr }),
    );
  });
}
