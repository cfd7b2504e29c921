import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, afterEach, beforeAll } from '@jest/globals';
import OpenAI from 'openai';
import { startLedger, type LedgerUnderTest } from './ledger-http.js';
import { startProviderDouble, type ProviderDouble } from './provider-doubles/index.js';

/**
 * The recording gateway under test: the real service with `LEDGER_UPSTREAMS` pointing at a
 * provider double (one OpenAI and one Anthropic upstream on it, each with its own keys), and the
 * official SDKs pointed at the gateway with a ledger producer key.
 */
export interface GatewayFixture {
  readonly ledger: LedgerUnderTest;
  readonly double: ProviderDouble;
  /** The upstream keys of the OpenAI upstream, then the Anthropic one's. */
  readonly openAiKeys: readonly string[];
  readonly anthropicKeys: readonly string[];
  /** Clients through the gateway as the producer `who` (default `agent`), on the session `sessionId` when given. */
  openai(options?: ClientOptions): Promise<OpenAI>;
  anthropic(options?: ClientOptions): Promise<Anthropic>;
  /** What the last response through a client built with `captureBytes` carried, byte for byte. */
  readonly received: Buffer[];
  close(): Promise<void>;
}

export interface ClientOptions {
  readonly sessionId?: string;
  readonly who?: string;
  readonly apiKey?: string;
  /** Keep each response's bytes in `received` (the body is read whole before the SDK sees it). */
  readonly captureBytes?: boolean;
}

export interface GatewayOptions {
  readonly keysPerUpstream?: number;
  /** The models the OpenAI upstream serves (default any). */
  readonly openAiModels?: readonly string[];
  readonly env?: Record<string, string>;
}

export async function startGateway({
  keysPerUpstream = 1,
  openAiModels,
  env = {},
}: GatewayOptions = {}): Promise<GatewayFixture> {
  const openAiKeys = Array.from({ length: keysPerUpstream }, (_, index) => `sk-upstream-openai-${index + 1}`);
  const anthropicKeys = Array.from({ length: keysPerUpstream }, (_, index) => `sk-ant-upstream-${index + 1}`);
  const double = await startProviderDouble({ keys: [...openAiKeys, ...anthropicKeys] });
  const folder = await mkdtemp(path.join(tmpdir(), 'ledger-gateway-'));
  const upstreamsFile = path.join(folder, 'upstreams.json');
  const upstream = (
    name: string,
    protocol: string,
    keys: readonly string[],
    models: readonly string[] | '*' = '*',
  ) => ({
    name,
    protocol,
    baseUrl: `${double.baseUrl}/v1`,
    models,
    keys: keys.map((key) => ({ key })),
  });
  const upstreams = [
    upstream('openai-double', 'openai', openAiKeys, openAiModels),
    upstream('anthropic-double', 'anthropic', anthropicKeys),
  ];
  await writeFile(upstreamsFile, JSON.stringify({ upstreams }));
  const ledger = await startLedger({ LEDGER_UPSTREAMS: upstreamsFile, ...env });
  const received: Buffer[] = [];
  const capturing = capturingFetch(received);
  const settings = async ({ sessionId, who = 'agent', apiKey, captureBytes = false }: ClientOptions) => ({
    apiKey: apiKey ?? (await ledger.credentials.key(who, { roles: ['producer', 'reader'] })),
    maxRetries: 0,
    ...(sessionId ? { defaultHeaders: { 'X-Ledger-Session': sessionId } } : {}),
    ...(captureBytes ? { fetch: capturing } : {}),
  });
  return {
    ledger,
    double,
    openAiKeys,
    anthropicKeys,
    received,
    openai: async (options = {}) =>
      new OpenAI({ baseURL: `${ledger.baseUrl}/gateway/openai/v1`, ...(await settings(options)) }),
    anthropic: async (options = {}) =>
      new Anthropic({ baseURL: `${ledger.baseUrl}/gateway/anthropic`, ...(await settings(options)) }),
    async close() {
      await ledger.close();
      await double.close();
      await rm(folder, { recursive: true, force: true });
    },
  };
}

/**
 * One gateway for a `describe` block, started before its tests and closed after them; each test's
 * unused scripted replies are forgotten so they cannot answer the next. Call the returned function
 * inside a test or hook.
 */
export function gatewayForSuite(options?: Parameters<typeof startGateway>[0]): () => GatewayFixture {
  let gateway: GatewayFixture | undefined;
  beforeAll(async () => {
    gateway = await startGateway(options);
  });
  afterEach(() => gateway?.double.resetScripts());
  afterAll(async () => {
    await gateway?.close();
  });
  return () => gateway!;
}

/** A fetch that keeps each response's bytes in `received` (the body is read whole before the caller sees it). */
export function capturingFetch(received: Buffer[]): typeof fetch {
  return async (input: Parameters<typeof fetch>[0], init?: RequestInit) => {
    const response = await fetch(input, init);
    const bytes = Buffer.from(await response.arrayBuffer());
    received.push(bytes);
    return new Response(bytes, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}

/** Polls `read` until `done` holds of its result (the read models follow the log), at most `timeoutMs`. */
export async function eventually<T>(
  read: () => Promise<T>,
  done: (value: T) => boolean,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value) || Date.now() > deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
