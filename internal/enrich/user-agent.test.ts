import assert from 'node:assert/strict';
import { test } from 'node:test';
import { blankEventRecord } from './record';
import { createPutUserAgent, createUserAgentParser, parseUserAgent, SERVER_DEVICE } from './user-agent';

const UA = {
  chromeWindows:
    'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36',
  safariIphone:
    'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4.1 Mobile/15E148 Safari/604.1',
  ipad: 'Mozilla/5.0 (iPad; CPU OS 16_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/16.6 Mobile/15E148 Safari/604.1',
  ipadOs18: 'Mozilla/5.0 (iPad; iPadOS 18_0; like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/18.0',
  samsungGalaxy:
    'Mozilla/5.0 (Linux; Android 14; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.6367.82 Mobile Safari/537.36',
  pixel: 'Mozilla/5.0 (Linux; Android 13; Pixel 7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/116.0.0.0 Mobile Safari/537.36',
  firefoxMac: 'Mozilla/5.0 (Macintosh; Intel Mac OS X 14.4; rv:125.0) Gecko/20100101 Firefox/125.0',
  samsungTv:
    'Mozilla/5.0 (SMART-TV; Linux; Tizen 6.0) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/4.0 Chrome/76.0.3809.146 TV Safari/537.36',
  googlebot: 'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)',
  curl: 'curl/8.4.0',
};

test('Chrome on Windows: desktop (ua-parser has no type), full browser version', () => {
  assert.deepEqual(parseUserAgent(UA.chromeWindows), {
    device: 'desktop',
    brand: '',
    model: '',
    browser: 'Chrome',
    browser_version: '124.0.0.0',
    os: 'Windows',
    os_version: '10',
  });
});

test('Safari on iPhone: mobile, Apple iPhone, iOS', () => {
  assert.deepEqual(parseUserAgent(UA.safariIphone), {
    device: 'mobile',
    brand: 'Apple',
    model: 'iPhone',
    browser: 'Mobile Safari',
    browser_version: '17.4.1',
    os: 'iOS',
    os_version: '17.4.1',
  });
});

test('iPad: tablet; an iPadOS 18 UA gets iOS and its version', () => {
  assert.deepEqual(parseUserAgent(UA.ipad), {
    device: 'tablet',
    brand: 'Apple',
    model: 'iPad',
    browser: 'Mobile Safari',
    browser_version: '16.6',
    os: 'iOS',
    os_version: '16.6',
  });
  const ipad18 = parseUserAgent(UA.ipadOs18);
  assert.equal(ipad18.device, 'tablet');
  assert.equal(ipad18.os, 'iOS');
  assert.equal(ipad18.os_version, '18.0');
});

test('Android phones: brand and model', () => {
  assert.deepEqual(parseUserAgent(UA.samsungGalaxy), {
    device: 'mobile',
    brand: 'Samsung',
    model: 'SM-S918B',
    browser: 'Chrome',
    browser_version: '124.0.6367.82',
    os: 'Android',
    os_version: '14',
  });
  const pixel = parseUserAgent(UA.pixel);
  assert.equal(pixel.brand, 'Google');
  assert.equal(pixel.model, 'Pixel 7');
  assert.equal(pixel.device, 'mobile');
});

test('Firefox on a Mac: desktop, Apple Macintosh', () => {
  const mac = parseUserAgent(UA.firefoxMac);
  assert.equal(mac.device, 'desktop');
  assert.equal(mac.brand, 'Apple');
  assert.equal(mac.model, 'Macintosh');
  assert.equal(mac.browser, 'Firefox');
  assert.equal(mac.browser_version, '125.0');
  assert.equal(mac.os, 'Mac OS');
  assert.equal(mac.os_version, '14.4');
});

test('other ua-parser device types pass through (smart TV)', () => {
  const tv = parseUserAgent(UA.samsungTv);
  assert.equal(tv.device, 'smarttv');
  assert.equal(tv.brand, 'Samsung');
  assert.equal(tv.os, 'Tizen');
});

test('no user-agent, an HTTP library, or an unrecognisable crawler: device "server", rest empty (OpenPanel)', () => {
  for (const ua of [null, undefined, '', '   ', UA.curl, 'Go-http-client/1.1', UA.googlebot]) {
    assert.deepEqual(parseUserAgent(ua), SERVER_DEVICE, String(ua));
  }
});

test('the cached parser returns the same answer and reuses it', () => {
  const parse = createUserAgentParser({ cacheSize: 2 });
  const first = parse(UA.safariIphone);
  assert.equal(parse(UA.safariIphone), first);
  assert.deepEqual(first, parseUserAgent(UA.safariIphone));
  // Evicted entries are parsed again, same answer.
  parse(UA.chromeWindows);
  parse(UA.pixel);
  assert.deepEqual(parse(UA.safariIphone), first);
});

test('the step fills the device fields from record.userAgent', () => {
  const result = createPutUserAgent().run(blankEventRecord({ userAgent: UA.samsungGalaxy }));
  assert.ok(result.ok);
  assert.equal(result.event.device, 'mobile');
  assert.equal(result.event.model, 'SM-S918B');
  assert.equal(result.event.isBot, false);
});

test('server-side: no user-agent, node, HTTP libraries and SDK runtimes show no browser and no OS', () => {
  const serverUas = [
    null, '', 'node', 'undici', 'okhttp/4.12.0', 'python-requests/2.31.0', 'python-httpx/0.27.0', 'curl/8.4.0',
    'Wget/1.21.4', 'axios/1.6.8', 'Go-http-client/2.0', 'Java/17.0.2', 'Apache-HttpClient/4.5.14 (Java/17.0.2)',
    'Dart/3.2 (dart:io)', 'PostmanRuntime/7.36.0', 'Bun/1.1.0', 'Deno/1.40.0',
  ];
  const put = createPutUserAgent();
  for (const ua of serverUas) {
    const r = put.run(blankEventRecord({ userAgent: ua }));
    assert.ok(r.ok);
    assert.equal(r.event.serverSide, true, String(ua));
    assert.equal(r.event.device, 'server', String(ua));
  }
  // A browser, or an app whose user-agent names its OS, is not server-side.
  for (const ua of [UA.chromeWindows, UA.safariIphone, UA.pixel, 'Dalvik/2.1.0 (Linux; U; Android 14; Pixel 7 Build/UQ1A)', 'MyApp/1.0 (iPhone; iOS 17.4; Scale/3.00)']) {
    const r = put.run(blankEventRecord({ userAgent: ua }));
    assert.ok(r.ok);
    assert.equal(r.event.serverSide, false, ua);
  }
});

test('device overrides replace the user-agent values one by one; the event is then not server-side', () => {
  const put = createPutUserAgent();
  // A mobile app behind okhttp: every field from the overrides, none from the user-agent.
  const app = put.run(blankEventRecord({
    userAgent: 'okhttp/4.12.0',
    deviceOverrides: { os: 'Android', os_version: '14', device: 'mobile', brand: 'Samsung', model: 'SM-S918B' },
  }));
  assert.ok(app.ok);
  assert.deepEqual(
    [app.event.device, app.event.os, app.event.os_version, app.event.brand, app.event.model, app.event.browser, app.event.browser_version],
    ['mobile', 'Android', '14', 'Samsung', 'SM-S918B', '', ''],
  );
  assert.equal(app.event.serverSide, false);
  // Only __os on a server user-agent: 'server' is dropped, the rest unknown.
  const osOnly = put.run(blankEventRecord({ userAgent: 'node', deviceOverrides: { os: 'iOS' } }));
  assert.ok(osOnly.ok);
  assert.deepEqual([osOnly.event.device, osOnly.event.os, osOnly.event.brand], ['', 'iOS', '']);
  assert.equal(osOnly.event.serverSide, false);
  // A browser user-agent keeps what is not overridden.
  const browser = put.run(blankEventRecord({ userAgent: UA.chromeWindows, deviceOverrides: { browser: 'MyShell', browser_version: '2.0' } }));
  assert.ok(browser.ok);
  assert.deepEqual(
    [browser.event.device, browser.event.os, browser.event.os_version, browser.event.browser, browser.event.browser_version],
    ['desktop', 'Windows', '10', 'MyShell', '2.0'],
  );
  // The cached parse is not changed by an override.
  const plain = put.run(blankEventRecord({ userAgent: UA.chromeWindows }));
  assert.ok(plain.ok);
  assert.equal(plain.event.browser, 'Chrome');
});
