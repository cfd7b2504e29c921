import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import type { LiveItem } from '../../apps/ledger/src/live/live-items.js';
import {
  coalescingWindowMs,
  LiveWriteBudget,
  fairLevel,
  type BudgetedStream,
} from '../../apps/ledger/src/live/live-write-budget.js';
import { SseStream, type SseOptions } from '../../apps/ledger/src/live/sse-stream.js';
import { until } from '../support/raw-connection.js';
import { connectSse } from '../support/sse-client.js';

const options: SseOptions = {
  coalesceMs: 50,
  writesPerSecond: 2_000,
  heartbeatMs: 15_000,
  maxBufferedBytes: 1_048_576,
};

describe('coalescingWindowMs', () => {
  it('is the configured window while the held-back streams fit in the writes they may make', () => {
    expect(coalescingWindowMs(0, 2_000, options)).toBe(50);
    expect(coalescingWindowMs(1, 2_000, options)).toBe(50);
    expect(coalescingWindowMs(100, 2_000, options)).toBe(50);
  });

  it('stretches so that the held-back streams together make about the writes a second they may make', () => {
    for (const heldBack of [250, 500, 1_000, 2_000]) {
      const window = coalescingWindowMs(heldBack, 2_000, options);
      expect((heldBack * 1_000) / window).toBeCloseTo(2_000, 6);
    }
    expect(coalescingWindowMs(1_000, 10_000, options)).toBe(100);
    expect(coalescingWindowMs(500, 1_000, options)).toBe(500);
  });

  it('never holds an update back more than a second, unless configured so, even with nothing left to share', () => {
    expect(coalescingWindowMs(5_000, 2_000, options)).toBe(1_000);
    expect(coalescingWindowMs(1, 0, options)).toBe(1_000);
    expect(coalescingWindowMs(1, -3_000, options)).toBe(1_000);
    expect(coalescingWindowMs(1_000_000, 2_000, { ...options, coalesceMs: 3_000 })).toBe(3_000);
  });

  it('coalesces nothing when the window is configured as 0, however many streams write', () => {
    expect(coalescingWindowMs(1_000_000, 0, { ...options, coalesceMs: 0 })).toBe(0);
  });
});

describe('fairLevel', () => {
  it('meets every demand when the budget covers them', () => {
    expect(fairLevel([200, 200, 200], 2_000)).toBe(Number.POSITIVE_INFINITY);
    expect(fairLevel([], 2_000)).toBe(Number.POSITIVE_INFINITY);
  });

  it('shares evenly between demands that all exceed an even share', () => {
    expect(
      fairLevel(
        Array.from({ length: 10 }, () => 4_000),
        2_000,
      ),
    ).toBe(200);
    expect(fairLevel([3_000, 6_000, 3_000], 1_500)).toBe(500);
  });

  it('leaves what small demands do not take to the large ones', () => {
    // Five demands of 20 are met; four of 4,000 share the other 1,900.
    expect(fairLevel([4_000, 20, 4_000, 20, 20, 4_000, 20, 20, 4_000], 2_000)).toBe(475);
    expect(fairLevel([100, ...Array.from({ length: 9 }, () => 4_000)], 2_000)).toBeCloseTo(1_900 / 9, 9);
  });
});

describe('LiveWriteBudget', () => {
  // 10 writes a second: with no prompt writes, a window is 100 ms per held-back stream.
  const budget = () => new LiveWriteBudget({ ...options, coalesceMs: 1, writesPerSecond: 10 });
  const stream = (tenant = 'one tenant') => ({ tenant });
  const streams = (count: number, tenant?: string) => Array.from({ length: count }, () => stream(tenant));

  it('shares the budget among held-back streams, each once, and the one asking', () => {
    const shared = budget();
    const [asking, ...others] = streams(6);
    expect(shared.windowMs(asking, 0)).toBe(100);
    for (const stream of others.slice(0, 3)) shared.wrote(stream, true, 0);
    shared.wrote(others[0], true, 10);
    expect(shared.windowMs(asking, 20)).toBe(400);
    shared.wrote(asking, true, 20);
    expect(shared.windowMs(asking, 30)).toBe(400);
    expect(shared.windowMs(others[4], 30)).toBe(500);
  });

  it('counts a prompt write as the write it is, and a stream that wrote promptly as held back no more', () => {
    const shared = budget();
    const [asking, busy, occasional] = streams(3);
    shared.wrote(busy, true, 0);
    // Eight prompt writes in two seconds: 4 a second of the 10, 6 left for two held-back streams.
    for (let write = 0; write < 8; write += 1) shared.wrote(occasional, false, write * 10);
    expect(shared.windowMs(asking, 100)).toBeCloseTo((2 * 1_000) / 6, 6);
    shared.wrote(busy, false, 150);
    expect(shared.windowMs(asking, 200)).toBeCloseTo(1_000 / (10 - 4.5), 6);
  });

  it('lets urgent writes out while the tenant asks for no more than its part, prompt writes included', () => {
    const roomy = new LiveWriteBudget({ ...options, coalesceMs: 50, writesPerSecond: 2_000 });
    const [asking, occasional] = streams(2);
    // 300 prompt writes in 1.8 s: about 160 a second, well within 2,000; far over 100.
    for (let write = 0; write < 300; write += 1) roomy.wrote(occasional, false, write * 6);
    expect(roomy.mayWriteUrgently(asking, 1_900)).toBe(true);
    expect(roomy.windowMs(asking, 1_900)).toBe(50);
    const tight = new LiveWriteBudget({ ...options, coalesceMs: 50, writesPerSecond: 100 });
    for (let write = 0; write < 300; write += 1) tight.wrote(occasional, false, write * 6);
    expect(tight.mayWriteUrgently(asking, 1_900)).toBe(false);
    expect(tight.windowMs(asking, 1_900)).toBeGreaterThan(50);
    // A configured window of a second or more is never stretched: urgent writes need not wait for it.
    const long = new LiveWriteBudget({ ...options, coalesceMs: 2_000, writesPerSecond: 100 });
    for (let write = 0; write < 300; write += 1) long.wrote(occasional, false, write * 6);
    expect(long.mayWriteUrgently(asking, 1_900)).toBe(true);
  });

  it("lets no tenant's urgent writes out in a burst: half the budget's share of a bucket at most, the other tenants untouched", () => {
    const shared = new LiveWriteBudget({ ...options, coalesceMs: 50, writesPerSecond: 2_000 });
    const [loud, other] = [stream('loud'), stream('other')];
    // 2,000 a second is 200 a bucket of 100 ms: one tenant gets 100 of them at once.
    for (let write = 0; write < 99; write += 1) shared.wrote(loud, false, 1_000);
    expect(shared.mayWriteUrgently(loud, 1_000)).toBe(true);
    shared.wrote(loud, false, 1_000);
    expect(shared.mayWriteUrgently(loud, 1_050)).toBe(false);
    expect(shared.mayWriteUrgently(other, 1_050)).toBe(true);
    expect(shared.mayWriteUrgently(loud, 1_100)).toBe(true);
  });

  it('rates prompt writes over the time their buckets cover', () => {
    const shared = budget();
    for (let write = 0; write < 8; write += 1) shared.wrote(stream(), false, 0);
    // The bucket of the writes starts 2.05 s back: 8 writes in 2.05 s, not in 2.
    expect(shared.windowMs(stream(), 2_050)).toBeCloseTo(1_000 / (10 - 8_000 / 2_050), 6);
  });

  it('counts a held-back stream until two of its windows have passed, and a closed stream not at all', () => {
    const shared = budget();
    const [asking, first, second, closing] = streams(4);
    shared.wrote(first, true, 0); // alone: a 100 ms window, counted until 200 ms (to the end of its bucket)
    shared.wrote(second, true, 0); // two held back: a 200 ms window, counted until 400 ms
    expect(shared.windowMs(asking, 299)).toBe(300);
    expect(shared.windowMs(asking, 300)).toBe(200);
    expect(shared.windowMs(asking, 499)).toBe(200);
    expect(shared.windowMs(asking, 500)).toBe(100);
    shared.wrote(closing, true, 600);
    expect(shared.windowMs(asking, 600)).toBe(200);
    shared.closed(closing);
    expect(shared.windowMs(asking, 600)).toBe(100);
  });

  it('forgets a prompt write after two seconds', () => {
    const shared = budget();
    for (let write = 0; write < 10; write += 1) shared.wrote(stream(), false, 4_000);
    expect(shared.windowMs(stream(), 4_000)).toBe(200);
    expect(shared.windowMs(stream(), 6_100)).toBe(100);
  });

  it('a later write keeps a stream counted past its earlier one', () => {
    const shared = budget();
    const [asking, busy, once] = streams(3);
    shared.wrote(busy, true, 0); // counted until 200 ms
    shared.wrote(once, true, 100); // a 200 ms window: counted until 500 ms
    shared.wrote(busy, true, 250); // a 200 ms window again: counted until 650 ms
    expect(shared.windowMs(asking, 350)).toBe(300);
    expect(shared.windowMs(asking, 600)).toBe(200);
    expect(shared.windowMs(asking, 700)).toBe(100);
  });

  it("shares between tenants first: one tenant's crowd does not stretch another tenant's windows", () => {
    const shared = new LiveWriteBudget(options);
    const crowds = Array.from({ length: 9 }, (_, tenant) => streams(200, `crowd ${tenant}`));
    const small = streams(5, 'small');
    for (const stream of [...crowds.flat(), ...small]) shared.wrote(stream, true, 0);
    // The small tenant's five need 100 writes a second, well under an even tenth of 2,000: they keep
    // the configured window, and the nine crowds share the other 1,900. Shared by stream, all 1,805
    // would get 902 ms.
    expect(shared.windowMs(small[0], 0)).toBe(50);
    expect(shared.windowMs(crowds[0][0], 0)).toBeCloseTo((200 * 1_000) / (1_900 / 9), 9);
    expect(shared.windowMs(stream('a tenant not yet writing'), 0)).toBe(50);
  });

  it('a tenant crowded alone shares the whole budget among its own streams', () => {
    const shared = new LiveWriteBudget(options);
    const crowd = streams(500, 'crowd');
    for (const stream of crowd) shared.wrote(stream, true, 0);
    expect(shared.windowMs(crowd[0], 0)).toBe(250);
    for (const stream of crowd.slice(250)) shared.closed(stream);
    expect(shared.windowMs(crowd[0], 0)).toBe(125);
  });

  it("one tenant's prompt writes do not stretch another tenant's windows; its own stretch to the most", () => {
    const shared = new LiveWriteBudget(options);
    const loud = streams(200, 'loud');
    // 4,000 writes in two seconds, each out at once: the whole budget. Counted as everyone's, they
    // gave every other tenant's held-back streams the one-second window.
    for (let at = 0; at < 2_000; at += 100) for (const stream of loud) shared.wrote(stream, false, at);
    expect(shared.windowMs(stream('quiet'), 2_000)).toBe(50);
    expect(shared.windowMs(loud[0], 2_000)).toBe(1_000);
  });

  it('keeps every window within its bounds through random churn, and lets a stream go as it closes', () => {
    let seed = 42;
    const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    const settingsTried = [
      options,
      { ...options, coalesceMs: 1, writesPerSecond: 10 },
      { ...options, coalesceMs: 3_000 },
    ];
    for (const settings of settingsTried) {
      const shared = new LiveWriteBudget(settings);
      const open = Array.from({ length: 300 }, (_, index) => stream(`tenant ${index % 17}`));
      const prompt: { stream: BudgetedStream; at: number }[] = [];
      let now = 0;
      for (let step = 0; step < 8_000; step += 1) {
        now += random() * 5;
        const chosen = open[Math.floor(random() * open.length)];
        const action = random();
        if (action < 0.45) shared.wrote(chosen, true, now);
        else if (action < 0.9) {
          shared.wrote(chosen, false, now);
          prompt.push({ stream: chosen, at: now });
        } else shared.closed(chosen);
        const window = shared.windowMs(chosen, now);
        expect(window).toBeGreaterThanOrEqual(settings.coalesceMs);
        expect(window).toBeLessThanOrEqual(Math.max(settings.coalesceMs, 1_000));
      }
      for (const closing of open) shared.closed(closing);
      // Once all have closed, only the prompt writes count: a budget that saw those alone agrees.
      const promptOnly = new LiveWriteBudget(settings);
      for (const write of prompt) promptOnly.wrote(write.stream, false, write.at);
      const asking = open.slice(0, 17);
      for (const at of [now, now + 2_200])
        expect(asking.map((one) => shared.windowMs(one, at))).toEqual(
          asking.map((one) => promptOnly.windowMs(one, at)),
        );
    }
  });

  it('a thousand open streams that never wrote leave the configured window', () => {
    const shared = new LiveWriteBudget(options);
    const idle = streams(1_000);
    expect(idle.map((stream) => shared.windowMs(stream, 0))).toEqual(idle.map(() => 50));
  });

  it('two thousand streams writing once every 1.9 s leave a busy feed the rest of the budget', () => {
    const shared = new LiveWriteBudget(options);
    const occasional = streams(2_000);
    occasional.forEach((stream, index) => shared.wrote(stream, false, (index * 1_900) / occasional.length));
    // About 1,050 writes a second of the 2,000: one busy feed keeps the configured window.
    expect(shared.windowMs(stream(), 1_950)).toBe(50);
  });

  it('a thousand streams sending a pair of changes every 1.9 s leave a busy feed about its configured window', () => {
    // Each pair: the first change goes out at once, the second waits for the window. Counted for a
    // fixed two seconds, the held-back half made every window about 500 ms here.
    const shared = new LiveWriteBudget(options);
    const due: { at: number; watcher: BudgetedStream; heldBack: boolean }[] = streams(1_000).flatMap((watcher, index) =>
      [0, 1, 2, 3].map((period) => ({ at: period * 1_900 + (index * 1_900) / 1_000, watcher, heldBack: false })),
    );
    due.sort((a, b) => a.at - b.at);
    while (due.length > 0 && due[0].at < 7_000) {
      const { at, watcher, heldBack } = due.shift()!;
      shared.wrote(watcher, heldBack, at);
      if (heldBack) continue;
      const second = { at: at + shared.windowMs(watcher, at), watcher, heldBack: true };
      const later = due.findIndex((write) => write.at > second.at);
      due.splice(later === -1 ? due.length : later, 0, second);
    }
    expect(shared.windowMs(stream(), 7_000)).toBeLessThanOrEqual(60);
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
  const urgentMessage = (position: number): LiveItem => ({
    event: 'message',
    key: `message:m${position}`,
    position: BigInt(position),
    data: { id: `m${position}`, status: 'success' },
    urgent: true,
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

  it('writes an urgent update at once, with the change held for the window before it; the next change waits again', async () => {
    const client = connectSse(url, { key: 'unused' });
    expect((await client.opened).status).toBe(200);
    stream.push([item(1n, 'first change')]);
    stream.push([item(2n, 'held for the window')]);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(client.events).toHaveLength(1);
    stream.push([urgentMessage(3)]);
    await until(() => client.events.length === 3, 3_000, 'the urgent update and the change held before it');
    expect(client.events.map((event) => [event.id, event.event])).toEqual([
      ['1', 'block'],
      ['2', 'block'],
      ['3', 'message'],
    ]);
    stream.push([item(4n, 'held again')]);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(client.events).toHaveLength(3);
    client.close();
  });

  it('holds urgent updates for the window too once the budget has stretched it', async () => {
    // One write a second for all streams: the first write stretches the window to a second.
    let tight: SseStream | undefined;
    const tightServer = http.createServer((_request, response) => {
      tight = new SseStream(response, { ...options, writesPerSecond: 1 }, () => undefined, undefined);
    });
    await new Promise<void>((resolve) => tightServer.listen(0, '127.0.0.1', resolve));
    const client = connectSse(`http://127.0.0.1:${(tightServer.address() as AddressInfo).port}/`, { key: 'unused' });
    try {
      expect((await client.opened).status).toBe(200);
      tight!.push([urgentMessage(1)]);
      tight!.push([urgentMessage(2)]);
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(client.events.map((event) => event.id)).toEqual(['1']);
      await until(() => client.events.length === 2, 3_000, 'the urgent update held for the stretched window');
    } finally {
      client.close();
      tight?.close('shutdown');
      await new Promise((resolve) => tightServer.close(resolve));
    }
  });

  it('writes a raw batch after a quiet spell at once; the next waits for the window, and closing ends the wait', async () => {
    const client = connectSse(url, { key: 'unused' });
    expect((await client.opened).status).toBe(200);
    const raw = (from: number) => [0, 1].map((offset) => ({ id: BigInt(from + offset), data: { n: from + offset } }));
    const started = performance.now();
    await stream.send(raw(1));
    const first = performance.now() - started;
    const sending = stream.send(raw(3));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(client.events.map((event) => event.id)).toEqual(['1', '2']);
    const closedAt = performance.now();
    stream.close('shutdown');
    await sending;
    // Its window is ten seconds: closing ends the wait, not the window.
    expect(performance.now() - closedAt).toBeLessThan(1_000);
    expect(first).toBeLessThan(1_000);
    expect(client.events).toHaveLength(2);
    client.close();
  });
});

describe('SseStream: what counts against the slow-client limit', () => {
  let server: http.Server | undefined;
  let stream: SseStream | undefined;
  let closedFor: string | undefined;

  /** A server whose one stream has these options, and a raw client of it that reads at `bytesPerSecond` (0: never). */
  async function connected(streamOptions: SseOptions, bytesPerSecond: number) {
    closedFor = undefined;
    server = http.createServer((_request, response) => {
      stream = new SseStream(response, streamOptions, (reason) => (closedFor = reason), undefined);
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const socket = net.connect((server.address() as AddressInfo).port, '127.0.0.1');
    socket.setNoDelay(true);
    let received = 0;
    const started = performance.now();
    if (bytesPerSecond === 0) socket.pause();
    socket.on('data', (part: Buffer) => {
      received += part.length;
      const ahead = (received / bytesPerSecond) * 1_000 - (performance.now() - started);
      if (ahead > 0) {
        socket.pause();
        setTimeout(() => socket.resume(), ahead);
      }
    });
    socket.write('GET / HTTP/1.1\r\nhost: x\r\naccept: text/event-stream\r\n\r\n');
    await until(() => stream !== undefined, 3_000, 'the stream');
    return { socket, stream: stream! };
  }

  afterEach(async () => {
    stream?.close('shutdown');
    stream = undefined;
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
  });

  const answers = (count: number): LiveItem[] =>
    Array.from({ length: count }, (_, index) => ({
      event: 'block',
      key: `block:m${index}:b`,
      position: BigInt(index + 1),
      data: { text: 'x'.repeat(800_000) },
    }));
  const change: LiveItem = { event: 'block', key: 'block:a:b', position: 100n, data: { text: 'change' } };

  for (const coalesceMs of [0, 50]) {
    it(`a 12 MB catch-up does not, for a client reading at 20 MB/s (window ${coalesceMs} ms)`, async () => {
      const { socket, stream: opened } = await connected({ ...options, coalesceMs }, 20 * 2 ** 20);
      opened.start(answers(15));
      opened.push([change]);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(closedFor).toBeUndefined();
      socket.destroy();
    });
  }

  it('a client that takes nothing for a heartbeat interval while over the limit is cut off, however quiet the stream', async () => {
    const { socket, stream: opened } = await connected({ ...options, heartbeatMs: 200 }, 0);
    opened.start(answers(15));
    await until(() => closedFor !== undefined, 3_000, 'the stalled client to be cut off');
    expect(closedFor).toBe('slow_client');
    socket.destroy();
  });

  it('a raw feed waiting for a slow reader leaves no listener behind, batch after batch', async () => {
    let response: http.ServerResponse | undefined;
    server = http.createServer((_request, serverResponse) => {
      response = serverResponse;
      stream = new SseStream(serverResponse, options, () => undefined, undefined);
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const socket = net.connect((server.address() as AddressInfo).port, '127.0.0.1');
    socket.on('data', () => undefined);
    socket.write('GET / HTTP/1.1\r\nhost: x\r\n\r\n');
    await until(() => stream !== undefined, 3_000, 'the stream');
    const listeners = () => response!.listenerCount('close') + response!.listenerCount('drain');
    const before = listeners();
    for (let batch = 0; batch < 20; batch += 1)
      await stream!.send([{ id: BigInt(batch + 1), data: { blob: 'y'.repeat(2 ** 21) } }]);
    expect(listeners()).toBe(before);
    socket.destroy();
  });

  it('stops writing a raw batch in parts as soon as the client hangs up', async () => {
    const { socket, stream: raw } = await connected({ ...options, coalesceMs: 0 }, 0);
    const blob = 'z'.repeat(100_000);
    const sending = raw.send(Array.from({ length: 100 }, (_, index) => ({ id: BigInt(index + 1), data: { blob } })));
    await new Promise((resolve) => setTimeout(resolve, 200));
    const hungUp = performance.now();
    socket.destroy();
    await sending;
    // Not the ten seconds a stalled client is given.
    expect(performance.now() - hungUp).toBeLessThan(3_000);
    expect(closedFor).toBe('client_closed');
  });

  it('writes a raw batch of large events in parts, every event with its id', async () => {
    const writes: number[] = [];
    server = http.createServer((_request, response) => {
      const write = response.write.bind(response) as (text: string) => boolean;
      response.write = ((text: string) => {
        writes.push(text.length);
        return write(text);
      }) as typeof response.write;
      stream = new SseStream(response, { ...options, coalesceMs: 0 }, () => undefined, undefined);
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const client = connectSse(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`, { key: 'unused' });
    expect((await client.opened).status).toBe(200);
    // 30 MB in one batch: as one string, a page of such events can pass V8's longest string.
    const blob = 'z'.repeat(100_000);
    await stream!.send(Array.from({ length: 300 }, (_, index) => ({ id: BigInt(index + 1), data: { blob } })));
    await until(() => client.events.length === 300, 10_000, 'every event');
    expect(client.events.map((event) => event.id)).toEqual(
      Array.from({ length: 300 }, (_, index) => String(index + 1)),
    );
    expect(Math.max(...writes)).toBeLessThan(1_048_576 + 110_000);
    client.close();
  });
});
