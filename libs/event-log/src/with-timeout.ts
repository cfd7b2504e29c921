/** What `work` settles with, or the error `timedOut` makes once `timeoutMs` passed first (`work` goes on unheard). */
export async function withTimeout<T>(work: Promise<T>, timeoutMs: number, timedOut: () => Error): Promise<T> {
  // A plain timer: an aborted `timers/promises` sleep builds an AbortError with its stack for every operation.
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(timedOut()), timeoutMs);
  });
  try {
    return await Promise.race([work, expired]);
  } finally {
    clearTimeout(timer);
  }
}
