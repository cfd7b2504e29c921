/**
 * The naive baseline the ingest bench compares against: a plain HTTP service that, for each
 * chunk, INSERTs a chunk row and UPDATEs (upserts) its block row inline, one statement at a time,
 * and rebuilds by replaying the chunk rows one by one. No log, no batching, no hash chain.
 */
import http from 'node:http';
import pg from 'pg';

type Chunk = { seq: number; type: string; text?: string };

export async function startNaiveService(
  connectionString: string,
): Promise<{ url: string; rebuild(): Promise<number>; close(): Promise<void> }> {
  const pool = new pg.Pool({ connectionString, max: 16 });
  await pool.query(
    `CREATE TABLE IF NOT EXISTS naive_chunks (id bigserial PRIMARY KEY, message_id text NOT NULL, seq int NOT NULL,
       type text NOT NULL, payload jsonb NOT NULL)`,
  );
  await pool.query(
    `CREATE TABLE IF NOT EXISTS naive_blocks (message_id text NOT NULL, kind text NOT NULL, content text,
       status text NOT NULL, PRIMARY KEY (message_id, kind))`,
  );
  const apply = async (client: pg.Pool | pg.PoolClient, messageId: string, chunk: Chunk, record: boolean) => {
    if (record)
      await client.query('INSERT INTO naive_chunks (message_id, seq, type, payload) VALUES ($1, $2, $3, $4)', [
        messageId,
        chunk.seq,
        chunk.type,
        JSON.stringify(chunk),
      ]);
    const kind = chunk.type.split('.')[0];
    await client.query(
      `INSERT INTO naive_blocks (message_id, kind, content, status) VALUES ($1, $2, $3, $4)
       ON CONFLICT (message_id, kind) DO UPDATE SET content = coalesce(excluded.content, naive_blocks.content), status = excluded.status`,
      [messageId, kind, chunk.text ?? null, chunk.type.endsWith('complete') ? 'success' : 'streaming'],
    );
  };
  const server = http.createServer((request, response) => {
    let body = '';
    const answer = async () => {
      try {
        const messageId = decodeURIComponent(request.url!.split('/')[2]);
        for (const chunk of JSON.parse(body) as Chunk[]) await apply(pool, messageId, chunk, true);
        response.writeHead(200).end('{}');
      } catch (error) {
        response.writeHead(500).end(String(error));
      }
    };
    request.on('data', (part: Buffer) => (body += part.toString()));
    request.on('end', () => void answer());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    async rebuild() {
      await pool.query('DELETE FROM naive_blocks');
      const { rows } = await pool.query<{ message_id: string; payload: Chunk }>(
        'SELECT message_id, payload FROM naive_chunks ORDER BY id',
      );
      for (const row of rows) await apply(pool, row.message_id, row.payload, false);
      return rows.length;
    },
    async close() {
      await new Promise((resolve) => server.close(resolve));
      await pool.end();
    },
  };
}
