import { setTimeout as sleep } from 'node:timers/promises';

/** What `work` settles with, or the error `timedOut` makes once `timeoutMs` passed first (`work` goes on unheard). */
export async function withTimeout<T>(work: Promise<T>, timeoutMs: number, timedOut: () => Error): Promise<T> {
  const timer = new AbortController();
  try {
    return await Promise.race([
      work,
      sleep(timeoutMs, undefined, { signal: timer.signal }).then(() => {
        throw timedOut();
      }),
    ]);
  } finally {
    timer.abort();
  }
}
