import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startLedger, type LedgerUnderTest } from './ledger-http.js';

/**
 * For gateway tests whose provider must do what the provider double never does (a crafted stream,
 * a listener an attacker owns): a plain HTTP server, and the real service with `LEDGER_UPSTREAMS`
 * naming one upstream.
 */
export interface OwnServer {
  /** `http://127.0.0.1:<port>` */
  readonly baseUrl: string;
  readonly port: number;
  close(): Promise<void>;
}

type Handler = (request: IncomingMessage, response: ServerResponse) => void;

export async function startOwnServer(handle: Handler): Promise<OwnServer> {
  const server = createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export interface OneUpstream {
  readonly protocol: 'openai' | 'anthropic';
  readonly baseUrl: string;
  readonly key: string;
}

/** The service with this one upstream (any model); `close` also removes its configuration file. */
export async function startLedgerWithUpstream({ protocol, baseUrl, key }: OneUpstream): Promise<LedgerUnderTest> {
  const folder = await mkdtemp(path.join(tmpdir(), 'ledger-own-upstream-'));
  const upstreamsFile = path.join(folder, 'upstreams.json');
  const upstream = { name: 'own', protocol, baseUrl, models: '*', keys: [{ key }] };
  await writeFile(upstreamsFile, JSON.stringify({ upstreams: [upstream] }));
  const ledger = await startLedger({ LEDGER_UPSTREAMS: upstreamsFile });
  return {
    ...ledger,
    async close() {
      await ledger.close();
      await rm(folder, { recursive: true, force: true });
    },
  };
}
