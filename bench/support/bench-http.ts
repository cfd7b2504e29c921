import { request } from 'undici';

/**
 * The benches' HTTP client: undici's `request`, which costs the load a fraction of what `fetch`
 * does (the fleet's load generator: 45–47 % → 20–22 % of a core). Kept free of the benches'
 * database helpers, so that the fleet's load process loads only this.
 */

/** The `authorization` header of a key, or none (the naive baseline takes no credential). */
export const bearer = (key: string | undefined): Record<string, string> =>
  key === undefined ? {} : { authorization: `Bearer ${key}` };

/** What the benches read from the service's replies: a created id, an append's position, a rebuild's figures. */
export interface BenchReply {
  readonly id: string;
  readonly position: number;
  readonly events: number;
  readonly durationMs: number;
}

export async function post(url: string, body: unknown, key?: string): Promise<BenchReply> {
  const headers = { 'content-type': 'application/json', ...bearer(key) };
  const result = await request(url, { method: 'POST', headers, body: JSON.stringify(body) });
  if (result.statusCode >= 300) throw new Error(`${url}: ${result.statusCode} ${await result.body.text()}`);
  return (await result.body.json()) as BenchReply;
}

/** A GET whose answer only has to arrive (a lag probe): its body is read and dropped. */
export async function read(url: string, key: string): Promise<void> {
  const result = await request(url, { headers: bearer(key) });
  await result.body.dump();
  if (result.statusCode >= 300) throw new Error(`${url}: ${result.statusCode}`);
}
