import { authHeaders } from './api';

export interface LiveEvent {
  readonly event: string;
  readonly id: string | undefined;
  readonly data: unknown;
}

/**
 * Follows a ledger SSE feed with the bearer credential (EventSource cannot send one), resuming
 * after a dropped connection from the last `id:` it saw through `Last-Event-ID`: nothing missed,
 * nothing repeated. Runs until `signal` aborts; `onState` tells the view whether it is connected.
 */
export async function followLive(
  url: string,
  onEvent: (event: LiveEvent) => void,
  onState: (connected: boolean) => void,
  signal: AbortSignal,
): Promise<void> {
  let lastEventId: string | undefined;
  let retryMs = 500;
  while (!signal.aborted) {
    try {
      const response = await fetch(url, {
        cache: 'no-store',
        headers: {
          ...authHeaders(),
          accept: 'text/event-stream',
          ...(lastEventId ? { 'last-event-id': lastEventId } : {}),
        },
        signal,
      });
      if (!response.ok || !response.body) throw new Error(`live feed answered ${response.status}`);
      onState(true);
      retryMs = 500;
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const frame = parseFrame(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
          if (!frame) continue;
          if (frame.id !== undefined) lastEventId = frame.id;
          onEvent(frame);
        }
      }
    } catch {
      if (signal.aborted) return;
    }
    onState(false);
    await new Promise((resolve) => setTimeout(resolve, retryMs));
    retryMs = Math.min(retryMs * 2, 10_000);
  }
}

function parseFrame(frame: string): LiveEvent | undefined {
  let event = 'message';
  let id: string | undefined;
  const data: string[] = [];
  for (const line of frame.split('\n')) {
    if (line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'event') event = value;
    else if (field === 'id') id = value;
    else if (field === 'data') data.push(value);
  }
  if (data.length === 0) return undefined;
  const text = data.join('\n');
  try {
    return { event, id, data: JSON.parse(text) as unknown };
  } catch {
    return { event, id, data: text };
  }
}
