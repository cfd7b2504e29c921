import http from 'node:http';
import { credentialsOf } from './test-credentials.js';

/** One Server-Sent Event as a browser's EventSource would dispatch it. */
export interface SseEvent {
  readonly event: string;
  readonly data: any;
  /** The `id:` field of this event, if it had one. */
  readonly id: string | undefined;
  /** The stream's last event id after this event (what EventSource would resume with). */
  readonly lastEventId: string | undefined;
}

export interface SseConnection {
  /** Resolves with the HTTP status and headers once the response starts. */
  readonly opened: Promise<{ status: number; body?: any }>;
  /** Resolves when the server ends the stream or it is closed. */
  readonly ended: Promise<void>;
  readonly events: SseEvent[];
  readonly comments: string[];
  lastEventId(): string | undefined;
  /** Stops reading without closing: the server's writes pile up (a stalled client). */
  stall(): void;
  close(): void;
}

/**
 * A real SSE client over HTTP/1.1 (node:http), parsing the event-stream format per the HTML
 * spec: fields `event`, `data`, `id`, comment lines, dispatch on a blank line.
 */
/** `as`: the principal named so on the ledger at that URL (see TestCredentials; default `client`); `key`: a credential given as is. */
export function connectSse(
  url: string,
  options: { lastEventId?: string; onEvent?: (event: SseEvent) => void; as?: string; key?: string } = {},
): SseConnection {
  const events: SseEvent[] = [];
  const comments: string[] = [];
  let lastEventId = options.lastEventId;
  let response: http.IncomingMessage | undefined;
  let resolveOpened!: (value: { status: number; body?: any }) => void;
  let rejectOpened!: (error: Error) => void;
  const opened = new Promise<{ status: number; body?: any }>((resolve, reject) => {
    resolveOpened = resolve;
    rejectOpened = reject;
  });
  let resolveEnded!: () => void;
  const ended = new Promise<void>((resolve) => (resolveEnded = resolve));
  let request: http.ClientRequest | undefined;
  let closed = false;
  const credential =
    options.key !== undefined
      ? Promise.resolve(options.key)
      : credentialsOf(new URL(url).origin).key(options.as ?? 'client');
  void credential.then(
    (key) => {
      if (closed) return resolveEnded();
      const headers = {
        accept: 'text/event-stream',
        authorization: `Bearer ${key}`,
        ...(options.lastEventId ? { 'last-event-id': options.lastEventId } : {}),
      };
      request = http.get(url, { headers }, (res) => {
        response = res;
        res.setEncoding('utf8');
        res.on('end', resolveEnded);
        res.on('close', resolveEnded);
        res.on('error', resolveEnded);
        if (res.statusCode !== 200) {
          let text = '';
          res.on('data', (chunk: string) => (text += chunk));
          res.on('end', () => resolveOpened({ status: res.statusCode!, body: text ? JSON.parse(text) : undefined }));
          return;
        }
        resolveOpened({ status: 200 });
        let buffer = '';
        let event = { type: '', data: [] as string[], id: undefined as string | undefined };
        res.on('data', (chunk: string) => {
          buffer += chunk;
          let newline: number;
          while ((newline = buffer.indexOf('\n')) >= 0) {
            const line = buffer.slice(0, newline).replace(/\r$/, '');
            buffer = buffer.slice(newline + 1);
            if (line === '') {
              if (event.data.length > 0) {
                if (event.id !== undefined) lastEventId = event.id;
                const dispatched: SseEvent = {
                  event: event.type || 'message',
                  data: JSON.parse(event.data.join('\n')),
                  id: event.id,
                  lastEventId,
                };
                events.push(dispatched);
                options.onEvent?.(dispatched);
              }
              event = { type: '', data: [], id: undefined };
            } else if (line.startsWith(':')) comments.push(line.slice(1).trim());
            else {
              const colon = line.indexOf(':');
              const field = colon < 0 ? line : line.slice(0, colon);
              const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
              if (field === 'event') event.type = value;
              else if (field === 'data') event.data.push(value);
              else if (field === 'id') event.id = value;
            }
          }
        });
      });
      request.on('error', (error) => {
        rejectOpened(error);
        resolveEnded();
      });
    },
    (error: Error) => {
      rejectOpened(error);
      resolveEnded();
    },
  );
  return {
    opened,
    ended,
    events,
    comments,
    lastEventId: () => lastEventId,
    stall: () => response?.pause(),
    close: () => {
      closed = true;
      request?.destroy();
    },
  };
}
