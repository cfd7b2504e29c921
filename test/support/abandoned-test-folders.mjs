// A test run's PostgreSQL lives in a folder of the temporary directory that its global teardown removes. A run
// stopped before its teardown (a failing check stops Jest: decision 0060) leaves it, 70–120 MB each; the next run
// removes such folders once their PostgreSQL is gone.
import { readdir, readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import process from 'node:process';

export const TEST_FOLDER_PREFIX = 'block-ledger-test-';
/** A folder with no PostgreSQL running is left this long: a run may be starting in it (initdb has not finished). */
const STARTING_MS = 10 * 60_000;

/** Removes the folders in `directory` of runs whose PostgreSQL no longer runs; returns their names. */
export async function removeAbandonedTestFolders(directory, now = Date.now()) {
  const removed = [];
  for (const name of await readdir(directory)) {
    if (!name.startsWith(TEST_FOLDER_PREFIX)) continue;
    const folder = path.join(directory, name);
    if (await postgresRuns(folder)) continue;
    if (now - (await stat(folder)).mtimeMs < STARTING_MS) continue;
    await rm(folder, { recursive: true, force: true });
    removed.push(name);
  }
  return removed;
}

/** Whether the postmaster named in the folder's `postgres/postmaster.pid` is alive. */
async function postgresRuns(folder) {
  const pidFile = await readFile(path.join(folder, 'postgres', 'postmaster.pid'), 'utf8').catch(() => undefined);
  const pid = Number(pidFile?.split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: alive, another user's process.
    return error.code === 'EPERM';
  }
}
