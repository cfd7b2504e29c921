import { randomBytes, randomUUID } from 'node:crypto';
import {
  createPostgresEventLog,
  matchesFilter,
  NO_STREAM,
  type EventFilter,
  type EventLog,
  type ProjectionEvent,
  type ReadAllOptions,
  type ReadAllResult,
} from '#event-log';
import { createEventStoreDbEventLog } from '#event-log/eventstoredb';
import { startEventStoreDouble } from '../support/eventstoredb-double/eventstoredb-double.js';
import { createTestDatabase } from '../support/test-database.js';

/** A log engine for these tests: opens logs with a byte bound on one store, and removes that store. */
interface Engine {
  open(readPageBytes?: number): Promise<EventLog>;
  teardown(): Promise<void>;
}

/** Both engines' page in events: what a read with no `maxCount` takes at most. */
const READ_PAGE_SIZE = 50;

const engines: [string, () => Promise<Engine>][] = [
  [
    'PostgreSQL',
    async () => {
      const database = await createTestDatabase();
      const { connectionString } = database;
      return {
        open: (readPageBytes) =>
          createPostgresEventLog({ connectionString, readPageBytes, readPageSize: READ_PAGE_SIZE }),
        teardown: () => database.drop(),
      };
    },
  ],
  [
    // The wire-protocol double: the adapter reads $all over gRPC as it does from a server, here in
    // server pages of 50 events, so that a page of the log spans several of them.
    'EventStoreDB',
    async () => {
      const double = await startEventStoreDouble();
      const { connectionString } = double;
      return {
        open: async (readPageBytes) =>
          createEventStoreDbEventLog({ connectionString, readPageBytes, readPageSize: READ_PAGE_SIZE }),
        teardown: () => double.stop(),
      };
    },
  ],
];

type Read = (options: ReadAllOptions) => Promise<ReadAllResult<ProjectionEvent>>;

/** Both reads of the log, the full one and the one for projections: the bound applies to each. */
const bothReads = (log: EventLog): Read[] => [
  (options) => log.readAll(options),
  (options) => log.readAllForProjections(options),
];

/**
 * Every page from the start of the log until one is caught up, checking at each that it moves on; `onPage` runs
 * between pages. Given the log's byte bound, also that each page was cut where the bound and the count say.
 */
async function readPages(
  read: Read,
  options: Omit<ReadAllOptions, 'fromPosition'>,
  onPage: () => Promise<void> = () => Promise.resolve(),
  pageBytes?: number,
) {
  const pages: (readonly ProjectionEvent[])[] = [];
  let fromPosition = 0n;
  for (;;) {
    const page = await read({ ...options, fromPosition });
    expect(page.events.every((event) => event.position > fromPosition)).toBe(true);
    expect(page.checkpoint).toBeGreaterThanOrEqual(page.events.at(-1)?.position ?? fromPosition);
    if (!page.caughtUp) expect(page.checkpoint).toBeGreaterThan(fromPosition);
    if (pageBytes !== undefined) expectCut(page, pageBytes, options.maxCount);
    if (page.events.length > 0) pages.push(page.events);
    fromPosition = page.checkpoint;
    if (page.caughtUp) return { pages, through: page.checkpoint };
    await onPage();
  }
}

const positions = (events: readonly ProjectionEvent[]) => events.map((event) => event.position);

/** An event's data as the client received it, in characters of its JSON. */
const dataSize = (event: ProjectionEvent) => JSON.stringify(event.data).length;

/**
 * How far an engine's measure of an event's data may be from `dataSize`: PostgreSQL counts what it
 * stored (jsonb's own size, or the text of a compressed value), tens of bytes off for these events.
 */
const MEASURE_SLACK = 64;

/**
 * The page holds at most `maxCount` events and stops at the first that reaches the byte bound; a page
 * that is not caught up is full: `maxCount` events (the page size without one), or the bound reached.
 */
function expectCut(page: ReadAllResult<ProjectionEvent>, pageBytes: number, maxCount: number | undefined): void {
  const { events } = page;
  const slack = MEASURE_SLACK * events.length;
  const before = events.slice(0, -1).reduce((sum, event) => sum + dataSize(event), 0);
  const through = before + (events.length > 0 ? dataSize(events.at(-1)!) : 0);
  expect(events.length).toBeLessThanOrEqual(maxCount ?? Number.MAX_SAFE_INTEGER);
  expect(before).toBeLessThan(pageBytes + slack);
  if (page.caughtUp) return;
  const full = events.length === (maxCount ?? READ_PAGE_SIZE) || through + slack >= pageBytes;
  expect({ events: events.length, bytes: through, full }).toEqual({
    events: events.length,
    bytes: through,
    full: true,
  });
}

describe.each(engines)('%s read pages bounded in bytes', (_engine, start) => {
  const pageBytes = 100_000;
  let engine: Engine;
  const logs: EventLog[] = [];
  let log: EventLog;
  beforeAll(async () => {
    engine = await start();
    log = await engine.open(pageBytes);
    logs.push(log);
  });
  afterAll(async () => {
    await Promise.all(logs.map((opened) => opened.close()));
    await engine.teardown();
  });

  it.each([
    ['incompressible', () => randomBytes(16_000).toString('hex')],
    // Stored compressed to a few kilobytes: measured by what it stored, a page would hold hundreds of them.
    ['highly compressible', () => 'a'.repeat(32_000)],
  ])(
    'cuts a page once its %s data reaches the bound, and the pages together give every event once, in order',
    async (_kind, text) => {
      const streamId = `bytes-${randomUUID()}`;
      const events = Array.from({ length: 12 }, (_, seq) => ({
        id: randomUUID(),
        type: 'test.large',
        data: { seq, text: text() },
      }));
      const appended = await log.append(streamId, events, NO_STREAM);
      for (const read of bothReads(log)) {
        const { pages } = await readPages(read, { maxCount: 1_000, filter: { streamPrefixes: [streamId] } });
        expect(positions(pages.flat())).toStrictEqual(positions(appended.events));
        // Each page but the last stops at the event that reaches the bound: 4 events of 32 kB.
        expect(pages.map((page) => page.length)).toStrictEqual([4, 4, 4]);
        for (const page of pages.slice(0, -1)) {
          const bytes = page.reduce((sum, event) => sum + dataSize(event), 0);
          expect(bytes).toBeGreaterThanOrEqual(pageBytes);
          expect(bytes - dataSize(page.at(-1)!)).toBeLessThan(pageBytes);
        }
      }
    },
  );

  it('refuses a bound that would cut every page before its first event, naming it', async () => {
    for (const readPageBytes of [0, -1, 0.5])
      await expect(engine.open(readPageBytes)).rejects.toThrow(/^readPageBytes must be a whole number of 1 or more/);
  });

  it('gives an event larger than the bound alone, so a reader always moves on', async () => {
    const streamId = `bytes-${randomUUID()}`;
    const events = [150_000, 10, 150_000].map((size) => ({
      id: randomUUID(),
      type: 'test.large',
      data: { text: randomUUID().repeat(size / 36 + 1) },
    }));
    const appended = positions((await log.append(streamId, events, NO_STREAM)).events);
    const { pages } = await readPages((options) => log.readAll(options), {
      maxCount: 1_000,
      filter: { streamPrefixes: [streamId] },
    });
    expect(pages.map(positions)).toStrictEqual([[appended[0]], [appended[1], appended[2]]]);
  });
});

/** Pages read after appends keep coming: whatever the bound, the pages give each matching event once, in order. */
describe.each(engines)('%s read pages cut in bytes, under appends', (_engine, start) => {
  let engine: Engine;
  const logs: EventLog[] = [];
  const open = async (readPageBytes?: number) => {
    const log = await engine.open(readPageBytes);
    logs.push(log);
    return log;
  };
  beforeAll(async () => {
    engine = await start();
  });
  afterAll(async () => {
    await Promise.all(logs.map((log) => log.close()));
    await engine.teardown();
  });

  // Its own timeout: hundreds of pages through the EventStoreDB wire double take 20 s alone here, more beside other suites.
  it('gives every matching event once, in order, for filters, counts and bounds, with appends under way', async () => {
    const run = randomUUID();
    const writer = await open();
    const sizes = [0, 10, 900, 3_000, 40_000];
    let seq = 0;
    // Three streams a round, of 1–4 events each, of sizes from nothing to past a bound, compressible or not.
    const appendRound = async () => {
      const round = seq++;
      await writer.appendMany(
        ['ra', 'rb', 'r_'].map((stream, s) => ({
          streamId: `${stream}-${run}-${round}`,
          expectedRevision: NO_STREAM,
          events: Array.from({ length: 1 + (round % 4) }, (_, i) => {
            const size = sizes[(round * 7 + i * 3 + s) % sizes.length];
            const text = (round + i) % 2 === 0 ? 'x'.repeat(size) : randomBytes(size / 2).toString('hex');
            return { id: randomUUID(), type: ['t.one', 't.two', 'u%'][(round + i) % 3], data: { round, text } };
          }),
        })),
      );
    };
    for (let round = 0; round < 12; round += 1) await appendRound();
    const filters: EventFilter[] = [
      { streamPrefixes: [`ra-${run}`] },
      { streamPrefixes: [`ra-${run}`, `r_-${run}`], eventTypePrefixes: ['t.t', 'u%'] },
      { eventTypePrefixes: ['u%'], streamPrefixes: [`r`] },
    ];
    const settings = [
      { bound: 1, maxCount: undefined },
      { bound: 2_500, maxCount: 3 },
      { bound: 50_000, maxCount: 2 },
      { bound: 50_000, maxCount: undefined },
    ];
    for (const { bound, maxCount } of settings) {
      const log = await open(bound);
      for (const read of bothReads(log))
        for (const filter of filters) {
          let appended = 0;
          const { pages, through } = await readPages(
            read,
            { filter, maxCount },
            async () => {
              if (appended++ < 2) await appendRound();
            },
            bound,
          );
          const events = pages.flat();
          // Everything the log held up to where the reader says it caught up.
          const expected = (await writer.readAll({ maxCount: 1_000_000, filter })).events.filter(
            (event) => event.position <= through,
          );
          expect(positions(events)).toStrictEqual(positions(expected));
          expect(events.every((event) => matchesFilter(event, filter))).toBe(true);
        }
    }
  }, 180_000);
});

/**
 * $all reads have no server-side filter, and a page that reaches its bound lets the rest of the server's answer
 * pass: the adapter asks for what the page has room for, or a log of large events is sent many times over.
 */
describe('EventStoreDB read pages ask the server for what they have room for', () => {
  it('sends each event of a log of large events about once, page after page, where a fixed count sent the rest of the log each time', async () => {
    const double = await startEventStoreDouble();
    const log = createEventStoreDbEventLog({
      connectionString: double.connectionString,
      readPageBytes: 100_000,
      readPageSize: READ_PAGE_SIZE,
    });
    try {
      const streamId = `large-${randomUUID()}`;
      const events = Array.from({ length: 40 }, (_, seq) => ({
        id: randomUUID(),
        type: 'test.large',
        data: { seq, text: randomBytes(16_000).toString('hex') },
      }));
      // Two appends: the server takes at most 1 MiB in one.
      const appended = [
        ...(await log.append(streamId, events.slice(0, 20), NO_STREAM)).events,
        ...(await log.append(streamId, events.slice(20), 19n)).events,
      ];
      const { pages } = await readPages((options) => log.readAll(options), {}, undefined, 100_000);
      expect(positions(pages.flat())).toStrictEqual(positions(appended));
      expect(pages.length).toBe(10);
      // The first page knows no sizes yet and asks for a full page; each after it, for its 4 events and the one
      // it starts from, and the read that finds the log caught up gets that one alone. A fixed count of 50 would
      // send 40 + 37 + 33 + … events.
      expect(double.eventsSentByAllReads).toBe(events.length + 9 * 5 + 1);
    } finally {
      await log.close();
      await double.stop();
    }
  });
});
