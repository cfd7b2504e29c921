import { DatabaseClient } from '#event-log';
import type pg from 'pg';

export const KEY_CHANGED_CHANNEL = 'api_key_changed';
const RECONNECT_MS = 1_000;

/**
 * Hears `api_key_changed` (decision 0028): one connection per key store, told the id of every
 * key row that changed, by any instance. Changes made while it is not listening are not heard,
 * so its owner is told of each gap (`onGap`): when the connection goes, and again once
 * listening resumes; `listening` says whether notifications can be relied on now.
 */
export class KeyChangeListener {
  private client: pg.Client | undefined;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private heard = false;

  constructor(
    private readonly connection: pg.ClientConfig,
    private readonly onChange: (keyId: string) => void,
    private readonly onGap: () => void,
  ) {}

  get listening(): boolean {
    return this.heard;
  }

  /** Starts listening; a database that cannot be reached now is retried, as a dropped connection is. */
  async start(): Promise<void> {
    const client: pg.Client = new DatabaseClient(this.connection);
    client.on('notification', ({ payload }) => {
      if (payload) this.onChange(payload);
    });
    client.on('error', () => this.reconnect());
    client.on('end', () => this.reconnect());
    this.client = client;
    try {
      await client.connect();
      await client.query(`LISTEN ${KEY_CHANGED_CHANNEL}`);
    } catch {
      this.reconnect();
      return;
    }
    if (this.closed) return;
    this.onGap();
    this.heard = true;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.heard = false;
    clearTimeout(this.reconnectTimer);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  private reconnect(): void {
    if (this.closed || this.reconnectTimer) return;
    this.heard = false;
    this.onGap();
    const broken = this.client;
    this.client = undefined;
    void broken?.end().catch(() => undefined);
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      void this.start();
    }, RECONNECT_MS);
  }
}
