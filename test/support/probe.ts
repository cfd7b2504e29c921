export interface Probed {
  readonly status: number;
  readonly headers: Headers;
  /** The body: parsed when JSON, else its text; `undefined` for an event stream (read no further than its status). */
  readonly body: any;
}

export interface ProbeOptions {
  /** Sent as `authorization: Bearer <credential>`; none when undefined. */
  readonly credential?: string;
  /** A raw `authorization` header, for credentials that are not even `Bearer <token>`. */
  readonly authorization?: string;
  readonly body?: unknown;
  readonly headers?: Record<string, string>;
}

/**
 * One HTTP request with exactly the credential given (or none). An event stream that opens is
 * closed as soon as its status is known, so SSE routes probe like any other.
 */
export async function probe(
  baseUrl: string,
  method: string,
  path: string,
  options: ProbeOptions = {},
): Promise<Probed> {
  const bearer = options.credential === undefined ? undefined : `Bearer ${options.credential}`;
  const authorization = options.authorization ?? bearer;
  const headers: Record<string, string> = {
    ...(authorization === undefined ? {} : { authorization }),
    ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
    ...options.headers,
  };
  const controller = new AbortController();
  const body = options.body === undefined ? undefined : JSON.stringify(options.body);
  const response = await fetch(`${baseUrl}${path}`, { method, headers, signal: controller.signal, body });
  if (response.headers.get('content-type')?.startsWith('text/event-stream')) {
    controller.abort();
    return { status: response.status, headers: response.headers, body: undefined };
  }
  const text = await response.text();
  // JSON and its `+json` kinds, not NDJSON (an export bundle), which is lines of text.
  const json = /^application\/([\w.-]+\+)?json\b/.test(response.headers.get('content-type') ?? '') && text !== '';
  return { status: response.status, headers: response.headers, body: json ? JSON.parse(text) : text };
}

/** Polls `check` until it returns a value other than undefined, bounded; the last value seen is in the error. */
export async function eventually<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
