/** The error body both OpenAI protocols send: `{error: {message, type, param, code}}`. */

/** The `type` and `code` OpenAI sends with each status. */
const KINDS: Record<number, { readonly type: string; readonly code: string | null }> = {
  400: { type: 'invalid_request_error', code: null },
  401: { type: 'invalid_request_error', code: 'invalid_api_key' },
  403: { type: 'invalid_request_error', code: 'unsupported_country_region_territory' },
  404: { type: 'invalid_request_error', code: 'unknown_url' },
  429: { type: 'requests', code: 'rate_limit_exceeded' },
  500: { type: 'server_error', code: null },
  503: { type: 'server_error', code: 'service_unavailable' },
};

export function openAiErrorBody(status: number, message: string, param: string | null = null) {
  const kind = KINDS[status] ?? KINDS[500];
  return { error: { message, type: kind.type, param, code: kind.code } };
}
