import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { LiveItem } from '../../apps/ledger/src/live/live-items.js';
import { coalescingWindowMs, SseStream, type SseOptions } from '../../apps/ledger/src/live/sse-stream.js';
import { until } from '../support/raw-connection.js';
import { connectSse } from '../support/sse-client.js';

const options: SseOptions = {
  coalesceMs: 50,
  writesPerSecond: 2_000,
  heartbeatMs: 15_000,
  maxBufferedBytes: 1_048_576,
};

describe('coalescingWindowMs', () => {
  it('is the configured window while few streams are open', () => {
    expect(coalescingWindowMs(0, options)).toBe(50);
    expect(coalescingWindowMs(1, options)).toBe(50);
    expect(coalescingWindowMs(100, options)).toBe(50);
  });

  it('stretches so that the open streams together make about the budgeted writes a second', () => {
    for (const open of [250, 500, 1_000, 2_000]) {
      const window = coalescingWindowMs(open, options);
      expect((open * 1_000) / window).toBeCloseTo(2_000, 6);
    }
    expect(coalescingWindowMs(1_000, { ...options, writesPerSecond: 10_000 })).toBe(100);
  });

  it('never holds an update back more than a second, unless configured so', () => {
    expect(coalescingWindowMs(5_000, options)).toBe(1_000);
    expect(coalescingWindowMs(1_000_000, options)).toBe(1_000);
    expect(coalescingWindowMs(1_000_000, { ...options, coalesceMs: 3_000 })).toBe(3_000);
  });

  it('coalesces nothing when the window is configured as 0, however many streams are open', () => {
    expect(coalescingWindowMs(1_000_000, { ...options, coalesceMs: 0 })).toBe(0);
  });
});

describe('SseStream over a real connection', () => {
  let server: http.Server;
  let url: string;
  let stream: SseStream;
  const window = { ...options, coalesceMs: 10_000 };
  const item = (position: bigint, text: string): LiveItem => ({
    event: 'block',
    key: 'block:m:b',
    position,
    data: { text },
  });

  beforeAll(async () => {
    server = http.createServer((_request, response) => {
      stream = new SseStream(response, window, () => undefined, undefined);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  });
  afterAll(async () => {
    stream?.close('shutdown');
    await new Promise((resolve) => server.close(resolve));
  });

  it('sends the catch-up and the first change after it at once; later changes wait for the window', async () => {
    const client = connectSse(url, { key: 'unused' });
    expect((await client.opened).status).toBe(200);
    stream.start([item(1n, 'caught up')]);
    stream.push([item(2n, 'first change')]);
    await until(() => client.events.length === 2, 3_000, 'the first change after the catch-up');
    expect(client.events.map((event) => [event.id, event.data.text])).toEqual([
      ['1', 'caught up'],
      ['2', 'first change'],
    ]);
    stream.push([item(3n, 'held for the window')]);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(client.events).toHaveLength(2);
    client.close();
  });
});
