import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { bounceRate, meanSeconds, roundedRatio, toNumber } from './numbers';

describe('insights numbers', () => {
  it('rounds half up to 2 decimals, 0 when there is nothing', () => {
    assert.equal(bounceRate(1, 3), 33.33);
    assert.equal(bounceRate(2, 3), 66.67);
    assert.equal(bounceRate(1, 8), 12.5);
    assert.equal(bounceRate(0, 0), 0);
    assert.equal(bounceRate(1, 1), 100);
    // 1/16 = 6.25 %; 1/32 = 3.125 % -> 3.13 (half up)
    assert.equal(bounceRate(1, 32), 3.13);
    assert.equal(roundedRatio(7, 3), 2.33);
    assert.equal(roundedRatio(0, 0), 0);
  });

  it('mean seconds from ms', () => {
    assert.equal(meanSeconds(1005, 1), 1.01); // 1.005 s rounds half up, no float drift
    assert.equal(meanSeconds(10_000 + 20_000, 2), 15);
    assert.equal(meanSeconds(1, 3), 0);
    assert.equal(meanSeconds(0, 0), 0);
  });

  it('toNumber converts pg bigint/numeric text', () => {
    assert.equal(toNumber('42'), 42);
    assert.equal(toNumber('12.50'), 12.5);
    assert.equal(toNumber(null), 0);
    assert.throws(() => toNumber('x'));
  });
});
