// A TCP proxy in front of the NATS server that can lose a client's JetStream pull requests
// (PUB/HPUB to $JS.API.CONSUMER.MSG.NEXT.*): the server then holds no pull request while the
// client's library believes one is waiting, the state in which a consumer stalls silently
// (https://github.com/nats-io/nats-server/issues/6290 and
// https://github.com/nats-io/nats.go/issues/1622 show servers in it on their own). Everything
// else passes through unchanged in both directions.
import net from 'node:net';

const PULL = '$JS.API.CONSUMER.MSG.NEXT.';

export class NatsPullLossProxy {
  /** While true, pull requests from clients are dropped. */
  losing = false;
  /** Pull requests dropped so far. */
  dropped = 0;
  private server: net.Server | null = null;
  private readonly sockets = new Set<net.Socket>();

  constructor(private readonly upstream: { host: string; port: number }) {}

  async listen(): Promise<number> {
    this.server = net.createServer((client) => this.connection(client));
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', r));
    return (this.server!.address() as net.AddressInfo).port;
  }

  private connection(client: net.Socket): void {
    const upstream = net.connect(this.upstream.port, this.upstream.host);
    for (const s of [client, upstream]) {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
      s.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    upstream.pipe(client);
    let buf: Buffer = Buffer.alloc(0);
    client.on('data', (chunk: Buffer) => {
      buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
      // Whole protocol commands: a control line, and for PUB/HPUB its payload and CRLF.
      for (;;) {
        const eol = buf.indexOf('\r\n');
        if (eol < 0) break;
        const line = buf.subarray(0, eol).toString('latin1');
        const [op = '', subject = '', ...rest] = line.split(' ');
        const verb = op.toUpperCase();
        let size = 0;
        if (verb === 'PUB' || verb === 'HPUB') size = Number(rest[rest.length - 1]) + 2;
        const end = eol + 2 + size;
        if (buf.length < end) break;
        const command = buf.subarray(0, end);
        buf = buf.subarray(end);
        if ((verb === 'PUB' || verb === 'HPUB') && subject.startsWith(PULL) && this.losing) {
          this.dropped++;
          continue;
        }
        upstream.write(command);
      }
    });
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}
