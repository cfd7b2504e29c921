import net from 'node:net';

/**
 * A TCP proxy in front of PostgreSQL for the faults a network makes:
 * - `freezeAll`: every open connection kept open both ways with nothing passing: a server that stopped (frozen,
 *   swapping, its storage hung) while its kernel still keeps its connections, keep-alive probes answered.
 * - `cut`: a connection cut half-open. The server's side is closed (its backend ends, its locks are released);
 *   the client's side stays open, never hears of it, and its own FIN is never answered. That is a connection
 *   after a database failover, a host gone, or a NAT that dropped its state.
 * - `mode = 'mute'`: new connections are accepted and never answered (a frozen server, a hung pooler), until
 *   `endMuted()` closes them cleanly; `mode = 'refuse'`: new connections are closed at once.
 */
export class CuttableProxy {
  mode: 'forward' | 'mute' | 'refuse' = 'forward';
  private readonly server: net.Server;
  private readonly pairs = new Map<number, { client: net.Socket; upstream: net.Socket; cut: boolean }>();
  private readonly sockets = new Set<net.Socket>();
  private readonly muted = new Set<net.Socket>();

  private constructor(
    private readonly host: string,
    private readonly port: number,
  ) {
    this.server = net.createServer({ allowHalfOpen: true }, (client) => this.accept(client));
  }

  private static async start(host: string, port: number): Promise<{ proxy: CuttableProxy; port: number }> {
    const proxy = new CuttableProxy(host, port);
    await new Promise<void>((resolve) => proxy.server.listen(0, '127.0.0.1', resolve));
    return { proxy, port: (proxy.server.address() as net.AddressInfo).port };
  }

  /** `connectionString` with its host and port pointed at a new proxy. */
  static async before(connectionString: string): Promise<{ proxy: CuttableProxy; connectionString: string }> {
    const target = new URL(connectionString);
    const { proxy, port } = await CuttableProxy.start(target.hostname, Number(target.port));
    const proxied = new URL(connectionString);
    proxied.hostname = '127.0.0.1';
    proxied.port = String(port);
    return { proxy, connectionString: proxied.toString() };
  }

  private accept(client: net.Socket): void {
    this.sockets.add(client);
    client.on('error', () => undefined);
    if (this.mode === 'refuse') return void client.destroy();
    if (this.mode === 'mute') return void this.muted.add(client.resume());
    const upstream = net.connect(this.port, this.host);
    const pair = { client, upstream, cut: false };
    this.sockets.add(upstream);
    upstream.on('connect', () => this.pairs.set(upstream.localPort!, pair));
    client.on('data', (data) => void (pair.cut || upstream.write(data)));
    upstream.on('data', (data) => void (pair.cut || client.write(data)));
    client.on('end', () => void (pair.cut || upstream.end()));
    upstream.on('end', () => void (pair.cut || client.end()));
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => void (pair.cut || client.destroy()));
  }

  /** Cuts the connection PostgreSQL sees coming from `clientPort` (pg_stat_activity.client_port). */
  cut(clientPort: number): void {
    const pair = this.pairs.get(clientPort);
    if (!pair) throw new Error(`no proxied connection from port ${clientPort}`);
    pair.cut = true;
    pair.upstream.destroy();
  }

  /** Every forwarded connection cut half-open at once (see `cut`). */
  cutAll(): void {
    for (const pair of this.pairs.values()) {
      pair.cut = true;
      pair.upstream.destroy();
    }
    this.pairs.clear();
  }

  /**
   * Every forwarded connection frozen at once (see the class); new ones are forwarded as `mode` says. Gives back
   * the ports PostgreSQL sees them from (`pg_stat_activity.client_port`).
   */
  freezeAll(): number[] {
    for (const pair of this.pairs.values()) pair.cut = true;
    const ports = [...this.pairs.keys()];
    this.pairs.clear();
    return ports;
  }

  /** Every forwarded connection reset at once, as a database restart or a failover does. */
  resetAll(): void {
    for (const { client, upstream } of this.pairs.values()) {
      upstream.destroy();
      client.resetAndDestroy();
    }
    this.pairs.clear();
  }

  /** The muted connections closed cleanly, as a server answering again would. */
  endMuted(): void {
    for (const socket of this.muted) socket.end();
    this.muted.clear();
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }
}
