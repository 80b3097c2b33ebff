// The API's JetStream publish path, alone (a diagnostic of the ingest's CPU): CPU per publish and
// publishes per second of the client library's `jetstream(nc).publish()` against Tidemark's
// AckedPublisher (internal/bus/acked-publish.ts), in one process, same server, same run,
// rounds alternating; one publish at a time, and 16 in flight (as 16 shard subjects under
// load). Messages are ~650 bytes (an op-sized batch of one) with a unique Nats-Msg-Id each.
//
//   npx tsx bench/jetstream-publish.ts [--count 20000] [--rounds 3]
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { connect } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { AckedPublisher } from '../internal/bus/acked-publish';
import { NATS_URL } from '../test/support/harness';
import { machineInfo, writeSection } from './run';

const { values } = parseArgs({ options: { count: { type: 'string', default: '20000' }, rounds: { type: 'string', default: '3' }, 'no-write': { type: 'boolean', default: false } } });
const COUNT = Number(values.count);
const ROUNDS = Number(values.rounds);

type PublishFn = (subject: string, data: Uint8Array, msgId: string) => Promise<unknown>;
interface Row { round: number; client: string; inFlight: number; perSecond: number; cpuUs: number }

async function measure(fn: PublishFn, subjectBase: string, inFlight: number): Promise<{ perSecond: number; cpuUs: number }> {
  const data = new TextEncoder().encode(`{"v":1,"ops":[${JSON.stringify({ id: randomUUID(), name: 'screen_view', path: '/products/item-1?utm_source=newsletter', pad: 'x'.repeat(520) })}]}`);
  let sent = 0;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(Array.from({ length: inFlight }, async (_, k) => {
    while (sent < COUNT) {
      sent++;
      await fn(`${subjectBase}.${k % 16}`, data, randomUUID());
    }
  }));
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(c0);
  return { perSecond: (COUNT / ms) * 1000, cpuUs: (cpu.user + cpu.system) / COUNT };
}

const nc = await connect({ servers: NATS_URL, noAsyncTraces: true });
const jsm = await jetstreamManager(nc);
const stream = `benchpub_${randomUUID().slice(0, 8)}`;
await jsm.streams.add({ name: stream, subjects: [`${stream}.>`], duplicate_window: 120e9 });
const js = jetstream(nc, { timeout: 5000 });
const acked = new AckedPublisher(nc);
const clients: [string, PublishFn][] = [
  ['library `js.publish()`', (s, d, id) => js.publish(s, d, { msgID: id, timeout: 5000 })],
  ['AckedPublisher', (s, d, id) => acked.publish(s, d, id, 5000)],
];
const rows: Row[] = [];
try {
  await measure(clients[0]![1], `${stream}.warm`, 16);
  await measure(clients[1]![1], `${stream}.warm`, 16);
  for (let round = 1; round <= ROUNDS; round++) {
    for (const inFlight of [1, 16]) {
      const order = round % 2 ? clients : [...clients].reverse();
      for (const [client, fn] of order) {
        const r = await measure(fn, `${stream}.r${round}`, inFlight);
        rows.push({ round, client, inFlight, ...r });
        console.error(`round ${round} ${client} in flight ${inFlight}: ${r.perSecond.toFixed(0)}/s, ${r.cpuUs.toFixed(1)} us CPU per publish`);
      }
    }
  }
} finally {
  acked.close();
  await jsm.streams.delete(stream).catch(() => {});
  await nc.close();
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const m = machineInfo();
const L: string[] = [];
L.push('## JetStream publish path', '');
L.push(`Command: \`npx tsx bench/jetstream-publish.ts --count ${COUNT} --rounds ${ROUNDS}\``, '');
L.push(`Machine: ${m.nproc} CPUs, ${m.cpu}, Node ${m.node}. Load average (1/5/15 min) before: ${m.load}. Date: ${m.date}. NATS on the same machine. A diagnostic of the API's publish path alone, not a headline: ${COUNT} publishes per row, one process, the two clients alternating.`, '');
L.push('| client | in flight | publishes/s (median) | CPU µs per publish (median) | rounds (µs) |', '|---|---:|---:|---:|---|');
for (const inFlight of [1, 16]) {
  for (const [client] of clients) {
    const rs = rows.filter((r) => r.client === client && r.inFlight === inFlight);
    L.push(`| ${client} | ${inFlight} | ${median(rs.map((r) => r.perSecond)).toFixed(0)} | ${median(rs.map((r) => r.cpuUs)).toFixed(1)} | ${rs.map((r) => r.cpuUs.toFixed(1)).join(', ')} |`);
  }
}
if (!values['no-write']) writeSection('JetStream publish path', L.join('\n'));
console.log(L.join('\n'));
process.exit(0);
