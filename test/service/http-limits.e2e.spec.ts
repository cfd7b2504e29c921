import http from 'node:http';
import type net from 'node:net';
import { loadConfig } from '../../apps/ledger/src/config/ledger-config.js';
import { connect, until } from '../support/raw-connection.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';
import { connectSse } from '../support/sse-client.js';

/** What a socket receives until the server closes it. */
function receivedUntilClosed(socket: net.Socket): Promise<string> {
  let received = '';
  socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
  socket.on('error', () => undefined);
  return new Promise((resolve) => socket.once('close', () => resolve(received)));
}

/** A fresh connection (no keep-alive pool) asking for /health. */
function health(baseUrl: string): Promise<number | string> {
  return new Promise((resolve) => {
    http
      .get(`${baseUrl}/health`, { agent: false }, (response) => {
        response.resume();
        resolve(response.statusCode!);
      })
      .once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error'));
  });
}

describe('HTTP server limits', () => {
  const timeouts = { LEDGER_HTTP_HEADERS_TIMEOUT_MS: '500', LEDGER_HTTP_REQUEST_TIMEOUT_MS: '1000' };

  describe('with short timeouts', () => {
    let ledger: LedgerUnderTest;
    beforeAll(async () => {
      ledger = await startLedger({ ...timeouts, LEDGER_LIVE_HEARTBEAT_MS: '100' });
    });
    afterAll(async () => {
      await ledger.close();
    });

    it('cuts off a client sending its body byte by byte, with 408, once the request timeout has passed', async () => {
      // With a valid key: without one the body is not read, the request is answered 401 at once (decision 0029).
      const key = await ledger.credentials.key('client');
      const socket = await connect(ledger.baseUrl);
      const closed = receivedUntilClosed(socket);
      const body = JSON.stringify({ title: 'x'.repeat(10_000) });
      const headers =
        `Host: ledger\r\nAuthorization: Bearer ${key}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${body.length}`;
      socket.write(`POST /v1/sessions HTTP/1.1\r\n${headers}\r\n\r\n`);
      let sent = 0;
      const dripping = setInterval(() => {
        if (!socket.destroyed) socket.write(body[sent++]);
      }, 20);
      try {
        await until(() => socket.destroyed || socket.readableEnded, 20_000, 'the server to close the slow connection');
      } finally {
        clearInterval(dripping);
      }
      expect(await closed).toMatch(/^HTTP\/1\.1 408 /);
      expect(sent).toBeLessThan(body.length);
    });

    it('cuts off a client that never finishes its headers', async () => {
      const socket = await connect(ledger.baseUrl);
      const closed = receivedUntilClosed(socket);
      socket.write('GET /health HTTP/1.1\r\nHost: ledger\r\n');
      await until(() => socket.destroyed || socket.readableEnded, 20_000, 'the server to close the connection');
      expect(await closed).toMatch(/^HTTP\/1\.1 408 /);
    });

    it('keeps a live SSE stream open well past the request timeout, and it still delivers', async () => {
      const stream = connectSse(`${ledger.baseUrl}/v1/events/live`);
      let ended = false;
      void stream.ended.then(() => (ended = true));
      expect((await stream.opened).status).toBe(200);
      const openedAt = Date.now();
      // Heartbeats keep arriving for three request timeouts (the server checks for expired requests meanwhile).
      await until(() => ended || (Date.now() - openedAt > 3_000 && stream.comments.length > 20), 20_000, 'heartbeats');
      expect(ended).toBe(false);
      const { id } = (await ledger.request('POST', '/v1/sessions', { title: 'late' })).body;
      const delivered = () => stream.events.some((event) => event.data?.streamId === `session-${id}`);
      await until(() => ended || delivered(), 20_000, 'the event');
      expect(ended).toBe(false);
      stream.close();
    });
  });

  describe('with a connection cap of 2', () => {
    let ledger: LedgerUnderTest;
    beforeAll(async () => {
      ledger = await startLedger({ LEDGER_HTTP_MAX_CONNECTIONS: '2' });
    });
    afterAll(async () => {
      await ledger.close();
    });

    it('makes room for a newcomer by closing the connection that has waited longest for a request', async () => {
      const open = [await connect(ledger.baseUrl), await connect(ledger.baseUrl)];
      const closed = open.map((socket) => receivedUntilClosed(socket));
      // Both idle on keep-alive once a request on each has been answered, the first one longer.
      for (const socket of open) {
        const answered = new Promise<void>((resolve) => socket.once('data', () => resolve()));
        socket.write('GET /health HTTP/1.1\r\nHost: ledger\r\n\r\n');
        await answered;
      }
      expect(await health(ledger.baseUrl)).toBe(200);
      await closed[0];
      expect(open[1].destroyed).toBe(false);
      open[1].destroy();
    });

    it('refuses newcomers while every connection has a request in progress, and accepts again once one ends', async () => {
      const streams = [connectSse(`${ledger.baseUrl}/v1/events/live`), connectSse(`${ledger.baseUrl}/v1/events/live`)];
      for (const stream of streams) expect((await stream.opened).status).toBe(200);
      expect(await health(ledger.baseUrl)).not.toBe(200);

      streams[0].close();
      await until(async () => (await health(ledger.baseUrl)) === 200, 10_000, 'a connection to be accepted again');
      streams[1].close();
    });
  });

  it('names the variable when a limit is out of range', () => {
    expect(() => loadConfig({ LEDGER_HTTP_MAX_CONNECTIONS: '0' })).toThrow(
      'environment variable LEDGER_HTTP_MAX_CONNECTIONS is invalid',
    );
    const headersLongerThanRequest = { LEDGER_HTTP_HEADERS_TIMEOUT_MS: '5000', LEDGER_HTTP_REQUEST_TIMEOUT_MS: '1000' };
    expect(() => loadConfig(headersLongerThanRequest)).toThrow(
      'environment variable LEDGER_HTTP_HEADERS_TIMEOUT_MS is invalid: must not exceed LEDGER_HTTP_REQUEST_TIMEOUT_MS',
    );
  });
});
