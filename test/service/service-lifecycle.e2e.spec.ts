import { existsSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import path from 'node:path';
import { createPostgresEventLog, NO_STREAM } from '#event-log';
import { createEventStoreDbEventLog } from '#event-log/eventstoredb';
import { newEvents } from '#event-log/testing';
import { passwordFileOf } from '../../apps/ledger/src/database/embedded-postgres.js';
import { startEventStoreDouble } from '../support/eventstoredb-double/eventstoredb-double.js';
import { freePort, reachableTempDir, startService, waitUntilHealthy } from '../support/service-process.js';
import { authorization } from '../support/test-credentials.js';

describe('the service process with its embedded PostgreSQL', () => {
  let dataDir: string;
  beforeEach(async () => {
    dataDir = await reachableTempDir('service');
  });
  afterEach(async () => {
    await rm(dataDir, { recursive: true, force: true });
  });

  it('starts, reports health, stops PostgreSQL cleanly on SIGTERM and SIGINT, not on SIGHUP, and reuses its data on the next start', async () => {
    const pgPort = await freePort();
    const env = { PORT: String(await freePort()), LEDGER_DATA_DIR: dataDir, LEDGER_PG_PORT: String(pgPort) };
    const pidFile = path.join(dataDir, 'postgres', 'postmaster.pid');

    const first = startService(env);
    const health = await waitUntilHealthy(first);
    expect(health).toMatchObject({
      status: 'ok',
      details: { database: { status: 'up' }, eventLog: { status: 'up', engine: 'postgres', appendLockHeldMs: null } },
    });
    // Health is public: it says nothing of how much was written.
    expect(JSON.stringify(health)).not.toMatch(/headPosition|waitingWriters/);
    const password = (await readFile(passwordFileOf(path.join(dataDir, 'postgres')), 'utf8')).trim();
    const connectionString = `postgres://ledger:${password}@127.0.0.1:${pgPort}/postgres`;
    const log = await createPostgresEventLog({ connectionString });
    await log.append('session-lifecycle', newEvents(3), NO_STREAM);
    await log.close();
    const metrics = await fetch(`${first.baseUrl}/metrics`, { headers: await authorization(first.baseUrl, 'admin') });
    expect(await metrics.text()).toContain('ledger_event_log_appended_events_total');

    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    expect(existsSync(pidFile)).toBe(false);

    const second = startService(env);
    await waitUntilHealthy(second);
    // The data folder was reused: the admin key the first start recorded and the three events are there.
    const reopened = await createPostgresEventLog({ connectionString });
    expect(await reopened.headPosition()).toBe(4n);
    await reopened.close();
    // SIGHUP reloads what can be reloaded (the gateway's upstreams); it stops nothing, PostgreSQL included.
    second.child.kill('SIGHUP');
    const stillRunning = new Promise((resolve) => setTimeout(() => resolve('running'), 2_000));
    expect(await Promise.race([second.exited, stillRunning])).toBe('running');
    expect(await waitUntilHealthy(second)).toMatchObject({ status: 'ok', details: { database: { status: 'up' } } });
    second.child.kill('SIGINT');
    expect(await second.exited).toBe(0);
    expect(existsSync(pidFile)).toBe(false);
  });

  it('keeps its event log in EventStoreDB when EVENTSTORE_CONNECTION_STRING is set', async () => {
    const double = await startEventStoreDouble();
    const log = createEventStoreDbEventLog({ connectionString: double.connectionString });
    try {
      await log.append('session-esdb', newEvents(2), NO_STREAM);
      const service = startService({
        PORT: String(await freePort()),
        LEDGER_DATA_DIR: dataDir,
        LEDGER_PG_PORT: String(await freePort()),
        EVENTSTORE_CONNECTION_STRING: double.connectionString,
      });
      const health = await waitUntilHealthy(service);
      expect(health).toMatchObject({ details: { eventLog: { status: 'up', engine: 'eventstoredb' } } });
      // What the service records lands in EventStoreDB.
      const opened = await fetch(`${service.baseUrl}/v1/sessions`, {
        method: 'POST',
        headers: { ...(await authorization(service.baseUrl, 'client')), 'content-type': 'application/json' },
        body: '{}',
      });
      const { id } = (await opened.json()) as { id: string };
      expect((await log.readStream(`session-${id}`)).map((event) => event.type)).toEqual(['session.opened']);
      // EventStoreDB goes away for longer than the adapter retries: a write is answered 503, and stopping still works.
      await double.stop();
      const duringOutage = await fetch(`${service.baseUrl}/v1/sessions`, {
        method: 'POST',
        headers: { ...(await authorization(service.baseUrl, 'client')), 'content-type': 'application/json' },
        body: '{}',
      });
      expect(duringOutage.status).toBe(503);
      expect(await duringOutage.json()).toMatchObject({ error: { code: 'database_connection_lost' } });
      service.child.kill('SIGTERM');
      expect(await service.exited).toBe(0);
    } finally {
      await log.close();
      await double.stop();
    }
  });

  it('says clearly that the port is taken, and leaves no PostgreSQL running', async () => {
    const blocker = createServer();
    const port = await freePort();
    await new Promise<void>((resolve) => blocker.listen(port, '0.0.0.0', resolve));
    try {
      const service = startService({
        PORT: String(port),
        LEDGER_DATA_DIR: dataDir,
        LEDGER_PG_PORT: String(await freePort()),
      });
      expect(await service.exited).toBe(1);
      expect(service.output()).toContain(`port ${port} is not available (EADDRINUSE); set PORT to a free port`);
      expect(service.output()).not.toMatch(/^\s+at /m);
      expect(existsSync(path.join(dataDir, 'postgres', 'postmaster.pid'))).toBe(false);
    } finally {
      blocker.close();
    }
  });

  it('names the variable when the configuration is wrong, and when the data folder cannot be created', async () => {
    const badPort = startService({ PORT: String(await freePort()), LEDGER_DATA_DIR: dataDir, LEDGER_PG_PORT: 'abc' });
    expect(await badPort.exited).toBe(1);
    expect(badPort.output()).toContain('environment variable LEDGER_PG_PORT is invalid');

    const notAFolder = startService({ PORT: String(await freePort()), LEDGER_DATA_DIR: '/etc/hostname/ledger' });
    expect(await notAFolder.exited).toBe(1);
    expect(notAFolder.output()).toContain(
      'the data folder /etc/hostname/ledger is not writable (ENOTDIR); set LEDGER_DATA_DIR to a writable folder',
    );
  });
});
