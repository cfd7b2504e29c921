import net from 'node:net';

/**
 * A TCP proxy in front of PostgreSQL whose connections can be cut half-open: the server's side is closed (its
 * backend ends, its locks are released), the service's side stays open and never hears of it. That is a
 * connection after a database failover, a host gone, or a NAT or firewall that dropped its state: a pg client
 * waits on it until keep-alive probes give up, minutes later.
 */
export class CuttableProxy {
  private readonly server: net.Server;
  private readonly pairs = new Map<number, { client: net.Socket; upstream: net.Socket; cut: boolean }>();
  private readonly sockets = new Set<net.Socket>();

  private constructor(
    private readonly host: string,
    private readonly port: number,
  ) {
    this.server = net.createServer((client) => this.accept(client));
  }

  static async start(host: string, port: number): Promise<{ proxy: CuttableProxy; port: number }> {
    const proxy = new CuttableProxy(host, port);
    await new Promise<void>((resolve) => proxy.server.listen(0, '127.0.0.1', resolve));
    return { proxy, port: (proxy.server.address() as net.AddressInfo).port };
  }

  private accept(client: net.Socket): void {
    const upstream = net.connect(this.port, this.host);
    const pair = { client, upstream, cut: false };
    this.sockets.add(client).add(upstream);
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

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }
}
