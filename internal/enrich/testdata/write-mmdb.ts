// Test helper: writes a tiny MaxMind DB (format 2.0, IPv6 tree, 24-bit records) so the
// nested GeoLite2-City field mapping is tested against the real reader without shipping
// MaxMind's licensed files. Supports the value types City records use.
import { isIP } from 'node:net';

type MmdbValue = string | number | bigint | boolean | MmdbValue[] | { [key: string]: MmdbValue };
type Slot = number | { data: number } | null;

interface MmdbNetwork {
  /** "81.2.69.0/24" or "2a02:ec80::/32". IPv4 networks are stored at ::a.b.c.d (as GeoLite2 does). */
  cidr: string;
  record: { [key: string]: MmdbValue };
}

export function writeMmdb(networks: MmdbNetwork[], databaseType = 'GeoLite2-City'): Buffer {
  const nodes: [Slot, Slot][] = [[null, null]];
  const data: Buffer[] = [];
  let dataSize = 0;
  networks.forEach(({ cidr, record }) => {
    const encoded = encode(record);
    const offset = dataSize;
    data.push(encoded);
    dataSize += encoded.length;
    const bits = prefixBits(cidr);
    let node = 0;
    bits.forEach((bit, i) => {
      const pair = nodes[node]!;
      if (i === bits.length - 1) {
        pair[bit] = { data: offset };
        return;
      }
      const next = pair[bit];
      if (typeof next === 'number') {
        node = next;
      } else {
        nodes.push([null, null]);
        node = nodes.length - 1;
        pair[bit] = node;
      }
    });
  });

  const nodeCount = nodes.length;
  const tree = Buffer.alloc(nodeCount * 6);
  const value = (slot: Slot): number =>
    slot === null ? nodeCount : typeof slot === 'number' ? slot : nodeCount + 16 + slot.data;
  nodes.forEach(([left, right], i) => {
    tree.writeUIntBE(value(left), i * 6, 3);
    tree.writeUIntBE(value(right), i * 6 + 3, 3);
  });

  const metadata = encode({
    node_count: nodeCount,
    record_size: 24,
    ip_version: 6,
    database_type: databaseType,
    languages: ['en'],
    binary_format_major_version: 2,
    binary_format_minor_version: 0,
    build_epoch: BigInt(Math.floor(Date.UTC(2024, 0, 1) / 1000)),
    description: { en: 'Tidemark test database' },
  });
  return Buffer.concat([
    tree,
    Buffer.alloc(16),
    ...data,
    Buffer.from('ABCDEF4D61784D696E642E636F6D', 'hex'),
    metadata,
  ]);
}

function prefixBits(cidr: string): number[] {
  const [address = '', lengthText = ''] = cidr.split('/');
  const v4 = isIP(address) === 4;
  const bytes = v4 ? [...new Array<number>(12).fill(0), ...address.split('.').map(Number)] : ipv6Bytes(address);
  const length = Number(lengthText) + (v4 ? 96 : 0);
  const bits: number[] = [];
  for (let i = 0; i < length; i++) bits.push(((bytes[i >> 3] ?? 0) >> (7 - (i & 7))) & 1);
  return bits;
}

function ipv6Bytes(address: string): number[] {
  const [head = '', tail = ''] = address.split('::');
  const groups = (s: string) => (s ? s.split(':').map((g) => parseInt(g, 16)) : []);
  const h = groups(head);
  const t = groups(tail);
  const all = [...h, ...new Array<number>(8 - h.length - t.length).fill(0), ...t];
  return all.flatMap((g) => [g >> 8, g & 0xff]);
}

function header(type: number, size: number): Buffer {
  const bytes: number[] = [];
  let first = type <= 7 ? type << 5 : 0;
  const ext = type > 7 ? [type - 7] : [];
  let sizeBytes: number[] = [];
  if (size < 29) first |= size;
  else if (size < 285) (first |= 29), (sizeBytes = [size - 29]);
  else if (size < 65_821) (first |= 30), (sizeBytes = [(size - 285) >> 8, (size - 285) & 0xff]);
  else throw new Error('value too large for the test writer');
  bytes.push(first, ...ext, ...sizeBytes);
  return Buffer.from(bytes);
}

function encode(value: MmdbValue): Buffer {
  if (typeof value === 'string') {
    const payload = Buffer.from(value, 'utf8');
    return Buffer.concat([header(2, payload.length), payload]);
  }
  if (typeof value === 'boolean') return header(14, value ? 1 : 0);
  if (typeof value === 'bigint') {
    const payload = Buffer.alloc(8);
    payload.writeBigUInt64BE(value);
    return Buffer.concat([header(9, 8), payload]);
  }
  if (typeof value === 'number') {
    if (Number.isInteger(value) && value >= 0 && value < 2 ** 32) {
      const payload = Buffer.alloc(4);
      payload.writeUInt32BE(value);
      return Buffer.concat([header(6, 4), payload]);
    }
    const payload = Buffer.alloc(8);
    payload.writeDoubleBE(value);
    return Buffer.concat([header(3, 8), payload]);
  }
  if (Array.isArray(value)) return Buffer.concat([header(11, value.length), ...value.map(encode)]);
  const entries = Object.entries(value);
  return Buffer.concat([header(7, entries.length), ...entries.flatMap(([k, v]) => [encode(k), encode(v)])]);
}
