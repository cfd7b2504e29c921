/**
 * Errors on the gateway's routes in the shape each provider's SDK reads (issue 14 item 6): the
 * OpenAI SDKs read `{error: {message, type, param, code}}`, the Anthropic SDK
 * `{type: "error", error: {type, message}}`; both pick their exception class by status.
 */
export type ErrorShape = 'openai' | 'anthropic';

export const GATEWAY_PATH = '/gateway';

/** The shape a request path answers in, or `undefined` outside the gateway. */
export function errorShapeOf(path: string): ErrorShape | undefined {
  // Routing ignores case, so the shape does too.
  const routed = path.toLowerCase();
  if (routed.startsWith(`${GATEWAY_PATH}/openai/`)) return 'openai';
  if (routed.startsWith(`${GATEWAY_PATH}/anthropic/`)) return 'anthropic';
  return undefined;
}

export interface ErrorFacts {
  readonly status: number;
  readonly code: string;
  readonly message: string;
  readonly field?: string;
}

export function providerErrorBody(shape: ErrorShape, { status, code, message, field }: ErrorFacts): unknown {
  if (shape === 'anthropic') return { type: 'error', error: { type: anthropicType(status), message } };
  return { error: { message, type: openAiType(status), param: field ?? null, code } };
}

function openAiType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 429) return 'rate_limit_error';
  if (status >= 500) return 'api_error';
  return 'invalid_request_error';
}

function anthropicType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 413) return 'request_too_large';
  if (status === 429) return 'rate_limit_error';
  if (status === 529) return 'overloaded_error';
  if (status >= 500) return 'api_error';
  return 'invalid_request_error';
}
