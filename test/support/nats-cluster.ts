// A private three-node NATS JetStream cluster (Debian's nats-server) on loopback ports, each
// node with its own store dir under one temp dir: for the replicated-stream fault test
// (test/faults-nats-cluster.test.ts) and the replicas benchmark (bench/nats-replicas.ts).
//
// Nodes are registered with the private-services cleanup: `stopAllPrivate()` (or the
// process exit hook) kills them and removes their dirs even when a test fails.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager, StorageType, type JetStreamManager, type StreamInfo } from '@nats-io/jetstream';
import { waitFor } from './harness';
import { ChildService, NATS_BIN, alive, portOpen, register, tail } from './private-services';

/** One cluster member: fixed name, client port and route port, so a replacement takes its place. */
export class NatsNode extends ChildService {
  readonly name: string;
  constructor(
    name: string,
    port: number,
    readonly routePort: number,
    dir: string,
    private readonly clusterName: string,
    private readonly routes: () => string[],
  ) {
    super(port, dir);
    this.name = name;
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  /** Starts the node on its store dir (created empty when missing, as on a new volume). */
  async start(): Promise<void> {
    if (alive(this.child)) return;
    mkdirSync(this.dir, { recursive: true });
    const child = spawn(NATS_BIN, [
      '-a', '127.0.0.1', '-p', String(this.port), '-n', this.name,
      '-js', '-sd', this.dir,
      '--cluster_name', this.clusterName, '--cluster', `nats://127.0.0.1:${this.routePort}`,
      '--routes', this.routes().join(','),
    ], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.child = child;
    this.logs = tail(child);
    await waitFor(async () => {
      if (!alive(child)) throw new Error(`nats-server ${this.name} exited: ${this.logs()}`);
      return portOpen(this.port);
    }, { timeoutMs: 15_000, intervalMs: 50, what: `nats-server ${this.name} on ${this.port}` });
  }

  /** The node's volume is lost: its store dir is removed (the node must be stopped). */
  wipeStore(): void {
    if (alive(this.child)) throw new Error(`wipeStore: ${this.name} is running`);
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Removes the cluster's root temp dir at cleanup. */
class TempDir {
  readonly name = 'nats-cluster-dir';
  constructor(readonly dir: string) {}
  killSync(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
  async destroy(): Promise<void> {
    this.killSync();
  }
}

export class NatsCluster {
  private constructor(readonly name: string, readonly root: string, readonly nodes: NatsNode[]) {}

  /** Starts `size` nodes (n1..nN) and waits until the cluster can place a stream of `size` replicas. */
  static async start(size = 3, name = `tm-${process.pid}`): Promise<NatsCluster> {
    const root = mkdtempSync(path.join(os.tmpdir(), 'tm-nats-cluster-'));
    register(new TempDir(root));
    const ports = await distinctPorts(2 * size);
    const routePorts = ports.slice(size);
    const routes = () => routePorts.map((p) => `nats://127.0.0.1:${p}`);
    const nodes = Array.from({ length: size }, (_, i) =>
      new NatsNode(`n${i + 1}`, ports[i]!, routePorts[i]!, path.join(root, `n${i + 1}`), name, routes));
    for (const n of nodes) register(n);
    const cluster = new NatsCluster(name, root, nodes);
    await Promise.all(nodes.map((n) => n.start()));
    await cluster.waitReady();
    return cluster;
  }

  /** Every client URL, comma-separated: the NATS_URL an operator would set. */
  get url(): string {
    return this.nodes.map((n) => n.url).join(',');
  }

  node(name: string): NatsNode {
    const n = this.nodes.find((x) => x.name === name);
    if (!n) throw new Error(`no node named ${name} (have ${this.nodes.map((x) => x.name).join(', ')})`);
    return n;
  }

  /** A management connection to the running nodes. Close it when done. */
  async manager(): Promise<{ nc: NatsConnection; jsm: JetStreamManager }> {
    const nc = await connect({ servers: this.nodes.filter((n) => n.running).map((n) => n.url), timeout: 3000, maxReconnectAttempts: -1, reconnectTimeWait: 250 });
    return { nc, jsm: await jetstreamManager(nc, { timeout: 5000, checkAPI: false }) };
  }

  /**
   * Waits until JetStream has a meta leader and enough peers to place a stream with as many
   * replicas as there are running nodes (a throwaway memory stream is created and deleted).
   */
  async waitReady(timeoutMs = 30_000): Promise<void> {
    const { nc, jsm } = await this.manager();
    const replicas = this.nodes.filter((n) => n.running).length;
    const probe = `probe_${Date.now().toString(36)}`;
    try {
      await waitFor(async () => {
        await jsm.streams.add({ name: probe, subjects: [`${probe}.>`], storage: StorageType.Memory, num_replicas: replicas });
        await jsm.streams.delete(probe);
        return true;
      }, { timeoutMs, intervalMs: 250, what: `JetStream cluster ${this.name} to place an R${replicas} stream` });
    } finally {
      await nc.close();
    }
  }

  /** Stream info from the cluster (leader, replicas and their lag). */
  async streamInfo(stream: string): Promise<StreamInfo> {
    const { nc, jsm } = await this.manager();
    try {
      return await jsm.streams.info(stream);
    } finally {
      await nc.close();
    }
  }

  /** Waits until `stream` has a leader and `replicas - 1` current followers; returns the info. */
  async waitStreamHealthy(stream: string, replicas: number, timeoutMs = 30_000): Promise<StreamInfo> {
    return waitFor<StreamInfo | null>(async () => {
      const si = await this.streamInfo(stream);
      const current = (si.cluster?.replicas ?? []).filter((r) => r.current && !r.offline).length;
      return si.cluster?.leader && si.config.num_replicas === replicas && current === replicas - 1 ? si : null;
    }, { timeoutMs, intervalMs: 250, what: `stream ${stream} to have a leader and ${replicas - 1} current followers` }) as Promise<StreamInfo>;
  }

  /** Kills every node and removes the store dirs. */
  async destroy(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.destroy()));
    rmSync(this.root, { recursive: true, force: true });
  }
}

/**
 * `n` free loopback ports, all different, below the kernel's ephemeral range (32768+) and
 * spawnApp's (12000-30000): a replacement node reuses its predecessor's ports, which no
 * outgoing connection may hold meanwhile.
 */
async function distinctPorts(n: number): Promise<number[]> {
  const out = new Set<number>();
  while (out.size < n) {
    const p = 5000 + Math.floor(Math.random() * 7000);
    if (!out.has(p) && (await canListen(p))) out.add(p);
  }
  return [...out];
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}
