import { rm } from 'node:fs/promises';
import { authorization } from '../support/test-credentials.js';
import {
  freePort,
  reachableTempDir,
  startService,
  waitUntilHealthy,
  type ServiceProcess,
} from '../support/service-process.js';

async function call(
  service: ServiceProcess,
  method: string,
  path: string,
  body?: unknown,
  as = 'client',
): Promise<{ status: number; body: any }> {
  const headers = {
    ...(await authorization(service.baseUrl, as)),
    ...(body ? { 'content-type': 'application/json' } : {}),
  };
  const response = await fetch(`${service.baseUrl}${path}`, {
    method,
    headers,
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: response.status, body: await response.json() };
}

describe('kill -9 during concurrent ingest', () => {
  let dataDir: string;
  afterAll(async () => {
    await rm(dataDir, { recursive: true, force: true });
  });

  it('loses no acknowledged chunk, and after a restart the projected rows equal a full rebuild', async () => {
    dataDir = await reachableTempDir('crash');
    const env = { PORT: String(await freePort()), LEDGER_DATA_DIR: dataDir, LEDGER_PG_PORT: String(await freePort()) };
    const first = startService(env);
    await waitUntilHealthy(first);

    const producers = await Promise.all(
      Array.from({ length: 8 }, async () => {
        const sessionId = (await call(first, 'POST', '/v1/sessions', {})).body.id as string;
        await call(first, 'POST', `/v1/sessions/${sessionId}/messages`, { role: 'user', content: 'go' });
        const messageId = (await call(first, 'POST', `/v1/sessions/${sessionId}/messages`, { role: 'assistant' })).body
          .id as string;
        return { sessionId, messageId, acknowledged: 0 };
      }),
    );
    let killed = false;
    const ingest = Promise.all(
      producers.map(async (producer) => {
        let text = '';
        while (!killed) {
          const batch = Array.from({ length: 20 }, (_, offset) => {
            const seq = producer.acknowledged + offset + 1;
            if (seq === 1) return { seq, type: 'text.start' };
            text += ` token${seq}`;
            return { seq, type: 'text.delta', text };
          });
          const response = await call(
            first,
            'POST',
            `/v1/sessions/${producer.sessionId}/messages/${producer.messageId}/chunks`,
            batch,
          ).catch(() => undefined);
          if (response?.status !== 200) break;
          producer.acknowledged += batch.length;
        }
      }),
    );
    // Kill once every producer has had batches acknowledged, while they keep posting.
    const deadline = Date.now() + 30_000;
    while (producers.some((producer) => producer.acknowledged < 100) && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 20));
    first.child.kill('SIGKILL');
    killed = true;
    await first.exited;
    await ingest;
    expect(producers.every((producer) => producer.acknowledged >= 100)).toBe(true);

    // The embedded PostgreSQL outlived the service; the restart adopts it.
    const second = startService(env);
    try {
      await waitUntilHealthy(second);
      let head = 0;
      for (const producer of producers) {
        const events = await call(second, 'GET', `/v1/sessions/${producer.sessionId}/events?limit=1000`);
        head = Math.max(head, ...events.body.events.map((event: { position: number }) => event.position));
        const seqs = events.body.events
          .filter((event: { type: string }) => event.type.startsWith('chunk.'))
          .map((event: { data: { seq: number } }) => event.data.seq);
        expect(seqs.length).toBeGreaterThanOrEqual(producer.acknowledged);
        expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, index) => index + 1));
      }
      const projected = await Promise.all(
        producers.map((producer) => call(second, 'GET', `/v1/sessions/${producer.sessionId}?minPosition=${head}`)),
      );
      expect(projected.every((response) => response.status === 200)).toBe(true);
      const rebuild = await call(second, 'POST', '/v1/admin/rebuild', undefined, 'admin');
      expect(rebuild.status).toBe(200);
      const rebuilt = await Promise.all(
        producers.map((producer) => call(second, 'GET', `/v1/sessions/${producer.sessionId}`)),
      );
      expect(rebuilt.map((response) => response.body.messages)).toEqual(
        projected.map((response) => response.body.messages),
      );
      for (const [index, producer] of producers.entries()) {
        const blocks = projected[index].body.messages.at(-1).blocks;
        expect(blocks[0].content.split(' ').length - 1).toBeGreaterThanOrEqual(producer.acknowledged - 1);
      }
    } finally {
      second.child.kill('SIGTERM');
      await second.exited;
    }
  });
});
