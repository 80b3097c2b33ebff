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
