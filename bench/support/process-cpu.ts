import { readdir, readFile } from 'node:fs/promises';
import type pg from 'pg';

/** Clock ticks per second of /proc's CPU times (USER_HZ, 100 on Linux). */
const TICKS_PER_SECOND = 100;

interface ProcStat {
  readonly parent: number;
  /** utime + stime, and with `reaped` also cutime + cstime (children that exited). */
  readonly own: number;
  readonly reaped: number;
}

/** `task`: one thread of the process, by its id (the process's own id is its main thread). */
async function procStat(pid: number, task?: number): Promise<ProcStat | undefined> {
  const folder = task === undefined ? `/proc/${pid}` : `/proc/${pid}/task/${task}`;
  const text = await readFile(`${folder}/stat`, 'utf8').catch(() => undefined);
  if (!text) return undefined;
  // The command name (field 2) may hold spaces; the fields after its closing parenthesis start at field 3.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  const at = (field: number) => Number(fields[field - 3]);
  return { parent: at(4), own: at(14) + at(15), reaped: at(16) + at(17) };
}

/** The PostgreSQL server's own process (its postmaster, whose tree `processTreeTicks` reads): the parent of `sql`'s backend. */
export async function postmasterPid(sql: pg.ClientBase | pg.Pool): Promise<number> {
  const { rows } = await sql.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  const parent = (await procStat(rows[0].pid))?.parent;
  if (parent === undefined) throw new Error('the PostgreSQL server runs on another machine: its CPU cannot be read');
  return parent;
}

/** CPU ticks used so far by one process (its threads). */
export async function processTicks(pid: number): Promise<number> {
  return (await procStat(pid))?.own ?? 0;
}

/**
 * A process's main thread (a Node process's JavaScript): CPU ticks used so far, and the time it has spent runnable on a
 * run queue, waiting for a core (`schedstat`, ns). A CPU profile counts that waiting as time in the frame it waited in
 * (issue 15's thirty-third round).
 */
export async function mainThread(pid: number): Promise<{ ticks: number; waitingNs: number }> {
  const [stat, schedstat] = await Promise.all([
    procStat(pid, pid),
    readFile(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').catch(() => ''),
  ]);
  return { ticks: stat?.own ?? 0, waitingNs: Number(schedstat.split(' ')[1] ?? 0) };
}

/** CPU ticks used so far by a server and all its children, living or exited (PostgreSQL's postmaster and backends). */
export async function processTreeTicks(rootPid: number): Promise<number> {
  const root = await procStat(rootPid);
  if (!root) return 0;
  let ticks = root.own + root.reaped;
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await procStat(Number(entry));
    if (stat?.parent === rootPid) ticks += stat.own + stat.reaped;
  }
  return ticks;
}

/** Percent of one core used between two tick readings `ms` apart. */
export const corePercent = (ticks: number, ms: number) => (ticks / TICKS_PER_SECOND / (ms / 1_000)) * 100;

/** CPU ticks in ms. */
export const ticksToMs = (ticks: number) => (ticks * 1_000) / TICKS_PER_SECOND;
