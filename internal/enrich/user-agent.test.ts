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
