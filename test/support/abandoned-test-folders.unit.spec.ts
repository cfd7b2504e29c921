import { spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { removeAbandonedTestFolders, TEST_FOLDER_PREFIX } from './abandoned-test-folders.mjs';

const HOUR_AGO = new Date(Date.now() - 60 * 60_000);

describe("the test runs' PostgreSQL folders left by runs stopped before their teardown", () => {
  let directory: string;
  beforeEach(async () => {
    directory = await mkdtemp(path.join(tmpdir(), 'abandoned-'));
  });
  afterEach(async () => {
    await rm(directory, { recursive: true, force: true });
  });

  /** A run's folder; `pid` written as its postmaster's; its time set `at`. */
  async function runFolder(name: string, pid: number | undefined, at?: Date): Promise<void> {
    const folder = path.join(directory, name);
    await mkdir(path.join(folder, 'postgres'), { recursive: true });
    if (pid !== undefined) await writeFile(path.join(folder, 'postgres', 'postmaster.pid'), `${pid}\n/data\n`);
    if (at) await utimes(folder, at, at);
  }

  it('removes those whose PostgreSQL is gone, and keeps running, starting and foreign ones', async () => {
    const exited = spawnSync(process.execPath, ['-e', '']).pid;
    await runFolder(`${TEST_FOLDER_PREFIX}died`, exited, HOUR_AGO);
    await runFolder(`${TEST_FOLDER_PREFIX}stopped`, undefined, HOUR_AGO);
    await runFolder(`${TEST_FOLDER_PREFIX}running`, process.pid, HOUR_AGO);
    await runFolder(`${TEST_FOLDER_PREFIX}starting`, undefined);
    await runFolder(`${TEST_FOLDER_PREFIX}died-just-now`, exited);
    await runFolder('another-program', exited, HOUR_AGO);

    const removed = await removeAbandonedTestFolders(directory);

    expect(removed.sort()).toEqual([`${TEST_FOLDER_PREFIX}died`, `${TEST_FOLDER_PREFIX}stopped`]);
    expect((await readdir(directory)).sort()).toEqual([
      'another-program',
      `${TEST_FOLDER_PREFIX}died-just-now`,
      `${TEST_FOLDER_PREFIX}running`,
      `${TEST_FOLDER_PREFIX}starting`,
    ]);
  });
});
