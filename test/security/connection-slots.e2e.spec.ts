import http from 'node:http';
import net from 'node:net';
import { authorization } from '../support/test-credentials.js';
import { startLedger, type LedgerUnderTest } from '../support/ledger-http.js';

/**
 * The service accepts at most LEDGER_HTTP_MAX_CONNECTIONS connections (default 1,000) and closes
 * any beyond them on arrival. A connection counts from the moment it opens, credential or not: a
 * client that opens that many and never ends the headers of its request holds every slot until the
 * headers timeout (10 s by default), then opens them again. Nobody else is answered meanwhile,
 * whatever their credential or tenant. Needs no key at all.
 *
 * The cap is small here so the attack needs few sockets; the timeouts stay at their defaults.
 */
const CAP = 20;

describe('attack: every connection slot held by clients that never finish a request', () => {
  let ledger: LedgerUnderTest;
  beforeAll(async () => {
    ledger = await startLedger({ LEDGER_HTTP_MAX_CONNECTIONS: String(CAP) });
  });
  afterAll(async () => {
    await ledger?.close();
  });

  function halfRequest(): Promise<net.Socket> {
    const { hostname, port } = new URL(ledger.baseUrl);
    return new Promise((resolve, reject) => {
      const socket = net.connect(Number(port), hostname, () => {
        socket.write('GET /health HTTP/1.1\r\nHost: ledger\r\n');
        resolve(socket);
      });
      socket.once('error', reject);
    });
  }

  /** A read on a connection of its own (no keep-alive pool, which would hold a slot from before). */
  async function freshRead(): Promise<number | string> {
    const headers = await authorization(ledger.baseUrl, 'client');
    return new Promise((resolve) => {
      http
        .get(`${ledger.baseUrl}/v1/sessions?limit=1`, { agent: false, headers }, (response) => {
          response.resume();
          resolve(response.statusCode!);
        })
        .once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
    });
  }

  it('a reader with a valid key is still answered', async () => {
    expect(await freshRead()).toBe(200);
    const held = await Promise.all(Array.from({ length: CAP }, halfRequest));
    try {
      expect(await freshRead()).toBe(200);
    } finally {
      for (const socket of held) socket.destroy();
    }
  });
});
