import { test } from 'node:test';
import assert from 'node:assert/strict';
import { generateSecret, hashSecret, verifySecret } from './secrets';

test('a secret verifies against its salted hash and a wrong one does not', async () => {
  const secret = generateSecret();
  const stored = await hashSecret(secret);
  assert.ok(!stored.includes(secret), 'the secret itself is not in the stored hash');
  assert.match(stored, /^scrypt\$16384\$8\$1\$/);
  assert.equal(await verifySecret(secret, stored), true);
  assert.equal(await verifySecret(secret + 'x', stored), false);
  assert.equal(await verifySecret(secret, 'garbage'), false);
});

test('two hashes of one secret differ (salted)', async () => {
  const s = generateSecret();
  assert.notEqual(await hashSecret(s), await hashSecret(s));
});

test('a fingerprint is the SHA-256 digest of the secret (32 bytes), equal only for the same secret', async () => {
  const { createHash } = await import('node:crypto');
  const { fingerprint, sameFingerprint } = await import('./secrets');
  for (const s of ['', 'a', generateSecret(), 'ünïcødé ✓', 'x'.repeat(10_000)]) {
    const fp = fingerprint(s);
    assert.equal(fp.length, 32);
    assert.deepEqual(fp, createHash('sha256').update(s).digest());
    assert.equal(sameFingerprint(fp, fingerprint(s)), true);
    assert.equal(sameFingerprint(fp, fingerprint(`${s}!`)), false);
  }
});
