/**
 * The fleet's floor: an HTTP server that reads and parses each chunk POST and answers it at once,
 * storing nothing and starting no database work. Run in its own process beside the load generator
 * and an idle PostgreSQL, it shows what the machine leaves for a service at a fleet size: the load
 * generator's CPU and the latency of an answer that costs nothing. A service that stores chunks
 * can only be slower.
 *
 *   startFloorService() from the fleet bench; as a script, it prints nothing and sends its port over IPC
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import http from 'node:http';
import { fileURLToPath } from 'node:url';

export interface FloorService {
  readonly url: string;
  readonly pid: number;
  stop(): Promise<void>;
}

/** Starts the floor in a process of its own and waits for its port. */
export async function startFloorService(): Promise<FloorService> {
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url)], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const [port] = (await once(child, 'message')) as [number];
  return {
    url: `http://127.0.0.1:${port}`,
    pid: child.pid!,
    async stop() {
      child.kill();
      await once(child, 'exit');
    },
  };
}

function serve(): void {
  const server = http.createServer((request, response) => {
    const parts: Buffer[] = [];
    request.on('data', (part: Buffer) => parts.push(part));
    request.on('end', () => {
      try {
        JSON.parse(Buffer.concat(parts).toString());
        response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      } catch {
        response.writeHead(400, { 'content-type': 'application/json' }).end('{}');
      }
    });
  });
  server.listen(0, '127.0.0.1', () => process.send!((server.address() as { port: number }).port));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) serve();
