/**
 * The console's only way to the ledger: the public HTTP API, with the signed-in credential as a
 * bearer token. Nothing here knows the service's internals.
 */
import { credential } from './auth';

/** A refusal as the API words it (`{error: {code, message, field?}}`), with the status. */
export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly field?: string,
  ) {
    super(message);
  }
}

export function authHeaders(): Record<string, string> {
  const held = credential();
  return held ? { authorization: `Bearer ${held}` } : {};
}

async function failureOf(response: Response): Promise<ApiFailure> {
  const body = (await response.json().catch(() => undefined)) as
    { error?: { code?: string; message?: string; field?: string } } | undefined;
  const error = body?.error;
  return new ApiFailure(
    response.status,
    error?.code ?? 'http_error',
    error?.message ?? response.statusText,
    error?.field,
  );
}

export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  // A tenant's data is kept by no cache: the browser's would outlive a sign-out.
  const response = await fetch(path, {
    method,
    cache: 'no-store',
    headers: { ...authHeaders(), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) throw await failureOf(response);
  return (await response.json()) as T;
}

export const get = <T>(path: string) => api<T>('GET', path);

/** A text answer (a signed checkpoint) or a download (an export bundle). */
export async function getBlob(path: string): Promise<Blob> {
  const response = await fetch(path, { cache: 'no-store', headers: authHeaders() });
  if (!response.ok) throw await failureOf(response);
  return response.blob();
}

/** A route another change has not delivered yet answers 404 `not_found` without naming a resource. */
export const routeMissing = (error: unknown) =>
  error instanceof ApiFailure &&
  error.status === 404 &&
  error.code === 'not_found' &&
  /^Cannot [A-Z]+ /.test(error.message);

/** What a refusal means for the person reading it, in plain words. */
export function plainWords(error: unknown): string {
  if (!(error instanceof ApiFailure)) return error instanceof Error ? error.message : String(error);
  switch (error.code) {
    case 'self_approval':
      return 'You requested this call yourself: someone else must decide it (separation of duties).';
    case 'already_approved':
      return 'You have already approved this call; another reviewer must add the next approval.';
    case 'expired':
      return 'The time to decide this call has run out: it counts as denied.';
    case 'unauthenticated':
      return 'Your credential was not accepted (expired or revoked?). Sign in again.';
    case 'rate_limited':
      return 'Too many requests with this credential; wait a moment and retry.';
  }
  if (error.status === 403) return `You may not do this with your roles: ${error.message}`;
  if (error.status === 409) return `Someone got there first, or the call moved on: ${error.message}`;
  if (error.status === 404) return 'Not found (or not in your tenant).';
  return `${error.message}${error.field ? ` (${error.field})` : ''}`;
}
