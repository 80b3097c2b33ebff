// The client address: OpenPanel's header order, public x-forwarded-for entries only,
// TRUSTED_IP_HEADERS narrowing, `__ip` overriding, the socket address last.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { asIp, DEFAULT_IP_HEADERS, ipFromHeaders, ipHeaderOrder, isPublicIp, IP_HEADERS } from './client-ip';
import { clientIp, clientIpOf } from './ops';
import { loadConfig } from '../config/config';

const SOCKET = '127.0.0.1';

test('each header in order: x-client-ip, openpanel-client-ip, cf-connecting-ip, true-client-ip, x-real-ip, then x-forwarded-for', () => {
  const all: Record<string, string> = {
    'x-client-ip': '1.1.1.1',
    'openpanel-client-ip': '2.2.2.2',
    'cf-connecting-ip': '3.3.3.3',
    'true-client-ip': '4.4.4.4',
    'x-real-ip': '5.5.5.5',
    'x-forwarded-for': '6.6.6.6',
  };
  // Removing the winner each time hands the answer to the next header of the list.
  const expected = ['1.1.1.1', '2.2.2.2', '3.3.3.3', '4.4.4.4', '5.5.5.5', '6.6.6.6', SOCKET];
  const headers = { ...all };
  for (let i = 0; i < expected.length; i++) {
    assert.equal(clientIp(headers, SOCKET, null), expected[i], `after removing ${IP_HEADERS.slice(0, i).join(', ')}`);
    delete headers[IP_HEADERS[i]!];
  }
});

test('a header that holds no address is skipped, not trusted', () => {
  assert.equal(clientIp({ 'x-client-ip': 'unknown', 'cf-connecting-ip': '203.0.113.9' }, SOCKET, null), '203.0.113.9');
  assert.equal(clientIp({ 'x-client-ip': '', 'x-real-ip': ' 198.51.100.4 ' }, SOCKET, null), '198.51.100.4');
  assert.equal(clientIp({ 'openpanel-client-ip': '999.1.1.1' }, SOCKET, null), SOCKET);
});

test('single-address headers take their first entry and any address (a server SDK may forward a private one)', () => {
  assert.equal(clientIp({ 'x-real-ip': '10.0.0.7, 8.8.8.8' }, SOCKET, null), '10.0.0.7');
  assert.equal(clientIp({ 'true-client-ip': '::ffff:81.2.69.160' }, SOCKET, null), '81.2.69.160');
});

test('x-forwarded-for: the first public entry, skipping private, loopback and link-local hops', () => {
  const xff = (v: string) => clientIp({ 'x-forwarded-for': v }, SOCKET, null);
  assert.equal(xff('81.2.69.142'), '81.2.69.142');
  assert.equal(xff('10.1.2.3, 192.168.0.4, 172.16.9.9, 127.0.0.1, 169.254.1.1, 81.2.69.160, 8.8.8.8'), '81.2.69.160');
  assert.equal(xff('garbage, 2a00:1450:4001::1'), '2a00:1450:4001::1');
  assert.equal(xff('fd00::1, fe80::1, ::1, 2a00:1450:4001::1'), '2a00:1450:4001::1');
  assert.equal(xff('81.2.69.160:51234'), '81.2.69.160'); // a port appended by the proxy
  assert.equal(xff('[2a00:1450:4001::1]:443'), '2a00:1450:4001::1');
  assert.equal(xff('10.0.0.1, 192.168.1.1'), SOCKET); // no public entry: the socket
  // 172.15 and 172.32 are outside 172.16/12
  assert.equal(xff('172.15.0.1'), '172.15.0.1');
  assert.equal(xff('172.32.0.1'), '172.32.0.1');
});

test('isPublicIp on the edges of each private range', () => {
  const cases: [string, boolean][] = [
    ['0.0.0.0', false], ['1.0.0.0', true], ['9.255.255.255', true], ['10.0.0.0', false], ['11.0.0.0', true],
    ['126.255.255.255', true], ['127.0.0.1', false], ['128.0.0.0', true], ['169.253.0.1', true], ['169.254.0.1', false],
    ['172.16.0.0', false], ['172.31.255.255', false], ['192.167.1.1', true], ['192.168.0.1', false], ['192.169.0.1', true],
    ['::', false], ['::1', false], ['fc00::1', false], ['fdff::1', false], ['fe00::1', true], ['fe80::1', false], ['febf::1', false],
    ['fec0::1', false], ['fc00::', false], ['fbff:ffff::1', true], ['2001:4860::8888', true], ['::ffff:10.0.0.1', false], ['::ffff:8.8.8.8', true],
  ];
  for (const [ip, pub] of cases) assert.equal(isPublicIp(ip), pub, ip);
});

test('x-forwarded-for: shared, documentation, benchmarking, multicast, reserved and broadcast entries are skipped too', () => {
  const xff = (v: string) => clientIp({ 'x-forwarded-for': v }, SOCKET, null);
  const v4 = (ip: string) => `${ip}, 8.8.8.8`;
  const v6 = (ip: string) => `${ip}, 2a00:1450:4001::1`;
  // the repro: a carrier-grade NAT address ahead of the client's
  assert.equal(xff('100.64.0.1, 8.8.8.8'), '8.8.8.8');
  const skipped4 = [
    '100.64.0.1', '100.127.255.254', // RFC 6598 shared address space, 100.64.0.0/10
    '192.0.2.1', '198.51.100.1', '203.0.113.7', // documentation (TEST-NET-1/2/3)
    '198.18.0.1', '198.19.255.254', // benchmarking, 198.18.0.0/15
    '224.0.0.1', '239.255.255.250', // multicast, 224.0.0.0/4
    '240.0.0.1', '254.1.2.3', // reserved, 240.0.0.0/4
    '255.255.255.255', // limited broadcast
    '0.1.2.3', // "this network", 0.0.0.0/8
    '192.0.0.9', // IETF protocol assignments, 192.0.0.0/24
    '::ffff:100.64.0.1', '::ffff:203.0.113.7', // IPv4-mapped: judged as the IPv4 address
  ];
  for (const ip of skipped4) assert.equal(xff(v4(ip)), '8.8.8.8', ip);
  const skipped6 = [
    '2001:db8::1', '2001:db8:ffff::1', // documentation, 2001:db8::/32
    'ff02::1', 'ff0e::1', // multicast, ff00::/8
    '2001:2::1', // benchmarking, 2001:2::/48
    '100::1', // discard, 100::/64
    'fec0::1', // deprecated site-local
    '64:ff9b::808:808', // NAT64
    '::ffff:0a00:0001', // mapped 10.0.0.1, written in hex
  ];
  for (const ip of skipped6) assert.equal(xff(v6(ip)), '2a00:1450:4001::1', ip);
  // just outside those ranges: public, and kept
  for (const ip of ['100.63.255.255', '100.128.0.1', '192.0.3.1', '198.17.255.255', '198.20.0.1', '198.51.101.1', '203.0.114.1', '223.255.255.254', '8.8.8.8']) {
    assert.equal(xff(`${ip}, 1.1.1.1`), ip, ip);
  }
  for (const ip of ['2001:db9::1', '2001:4860:4860::8888', '2a00:1450:4001::1']) assert.equal(xff(`${ip}, 1.1.1.1`), ip, ip);
  // none public: the socket
  assert.equal(xff('100.64.0.1, 192.0.2.1, 2001:db8::1, ff02::1'), SOCKET);
});

test('isPublicIp on the edges of the shared, documentation, benchmarking, multicast and reserved ranges', () => {
  const cases: [string, boolean][] = [
    ['100.63.255.255', true], ['100.64.0.0', false], ['100.127.255.255', false], ['100.128.0.0', true],
    ['192.0.1.255', true], ['192.0.2.0', false], ['192.0.2.255', false], ['192.0.3.0', true],
    ['198.17.255.255', true], ['198.18.0.0', false], ['198.19.255.255', false], ['198.20.0.0', true],
    ['198.51.99.255', true], ['198.51.100.0', false], ['198.51.100.255', false], ['198.51.101.0', true],
    ['203.0.112.255', true], ['203.0.113.0', false], ['203.0.113.255', false], ['203.0.114.0', true],
    ['223.255.255.255', true], ['224.0.0.0', false], ['239.255.255.255', false], ['240.0.0.0', false],
    ['255.255.255.254', false], ['255.255.255.255', false],
    ['2001:db7:ffff::1', true], ['2001:db8::', false], ['2001:db8:ffff:ffff::1', false], ['2001:db9::', true],
    ['feff:ffff::1', false] /* fec0::/10 site-local */, ['ff00::', false], ['ffff:ffff::1', false],
    ['::ffff:100.64.0.1', false], ['::ffff:192.0.2.1', false], ['::ffff:224.0.0.1', false], ['::ffff:0808:0808', true],
    ['fe80::1%eth0', false], ['fe80::1%eth0.1', false],
    ['', false], ['not an address', false], ['8.8.8.8:53', false], ['010.0.0.1', false], ['0x08.8.8.8', false],
  ];
  for (const [ip, pub] of cases) assert.equal(isPublicIp(ip), pub, ip);
});

test('asIp: plain, mapped, with a port, and garbage', () => {
  assert.equal(asIp('1.2.3.4'), '1.2.3.4');
  assert.equal(asIp('::ffff:1.2.3.4'), '1.2.3.4');
  assert.equal(asIp('1.2.3.4:80'), '1.2.3.4');
  assert.equal(asIp('[::1]:80'), '::1');
  assert.equal(asIp('[::1]'), '::1');
  assert.equal(asIp('1.2.3.4:'), null);
  assert.equal(asIp('300.2.3.4:80'), null);
  assert.equal(asIp('example.com'), null);
  assert.equal(asIp(''), null);
});

test('__ip overrides every header and the socket', () => {
  assert.equal(clientIp({ 'x-client-ip': '1.1.1.1', 'x-forwarded-for': '2.2.2.2' }, SOCKET, '9.9.9.9'), '9.9.9.9');
  // an override that is no address falls back to the headers
  assert.equal(clientIp({ 'x-client-ip': '1.1.1.1' }, SOCKET, 'nope'), '1.1.1.1');
});

test('TRUSTED_IP_HEADERS narrows the headers read; their order stays the default one', () => {
  const headers = { 'x-client-ip': '1.1.1.1', 'cf-connecting-ip': '3.3.3.3', 'x-real-ip': '5.5.5.5', 'x-forwarded-for': '6.6.6.6' };
  const read = (env: string | undefined) => clientIp(headers, SOCKET, null, ipHeaderOrder(loadConfig(env === undefined ? {} : { TRUSTED_IP_HEADERS: env }).TRUSTED_IP_HEADERS));
  assert.equal(read(undefined), '1.1.1.1');
  assert.equal(read(''), '1.1.1.1'); // empty = unset
  assert.equal(read('cf-connecting-ip'), '3.3.3.3');
  assert.equal(read('X-Forwarded-For, x-real-ip'), '5.5.5.5'); // case and spaces do not matter; x-real-ip comes first
  assert.equal(read('x-forwarded-for'), '6.6.6.6');
  assert.equal(read('none'), SOCKET);
  // __ip still overrides a narrowed list
  assert.equal(clientIp(headers, SOCKET, '9.9.9.9', ipHeaderOrder([])), '9.9.9.9');
});

test('TRUSTED_IP_HEADERS with an unknown header is a configuration error naming it', () => {
  assert.throws(() => loadConfig({ TRUSTED_IP_HEADERS: 'x-client-ip,forwarded' }), /TRUSTED_IP_HEADERS: unknown header forwarded/);
});

test('the socket address is read only when no header decides', () => {
  const order = ipHeaderOrder(['x-real-ip', 'x-forwarded-for']);
  const cases: [Record<string, string>, boolean][] = [
    [{ 'x-real-ip': '5.5.5.5' }, false],
    [{ 'x-forwarded-for': '10.0.0.1, 6.6.6.6' }, false],
    [{ 'x-forwarded-for': '10.0.0.1' }, true],
    [{ 'x-client-ip': '1.1.1.1' }, true], // not trusted here
    [{}, true],
  ];
  for (const [headers, reads] of cases) {
    let read = false;
    const req = { headers, get remoteAddress() { read = true; return SOCKET; } };
    clientIpOf(req, null, order);
    assert.equal(read, reads, JSON.stringify(headers));
    assert.equal(read, ipFromHeaders(headers, order) === null);
  }
});

test('TRUSTED_IP_HEADERS unset is the default order itself (the hot path reads it by constant names)', () => {
  assert.equal(ipHeaderOrder(loadConfig({}).TRUSTED_IP_HEADERS), DEFAULT_IP_HEADERS);
  // and a narrowed list that happens to hold every header answers exactly as the default
  const all = ipHeaderOrder(['x-forwarded-for', 'x-real-ip', 'true-client-ip', 'cf-connecting-ip', 'openpanel-client-ip', 'x-client-ip']);
  assert.notEqual(all, DEFAULT_IP_HEADERS);
  const cases: Record<string, string>[] = [
    {}, { 'x-forwarded-for': '10.0.0.1, 8.8.8.8' }, { 'x-real-ip': 'nope', 'true-client-ip': '9.9.9.9' },
    { 'x-client-ip': '1.1.1.1', 'cf-connecting-ip': '3.3.3.3' }, { 'openpanel-client-ip': '::ffff:2.2.2.2' },
  ];
  for (const h of cases) assert.equal(ipFromHeaders(h, all), ipFromHeaders(h), JSON.stringify(h));
});
