import assert from 'node:assert/strict';
import { test } from 'node:test';
import { blankEventRecord } from './record';
import { checkRecord } from './validate';

const valid = () =>
  blankEventRecord({
    id: '0190c0de-0000-7000-8000-000000000001',
    projectId: 'proj_1',
    name: 'screen_view',
    deviceId: '0123456789abcdef0123456789abcdef',
    profileId: 'user_42',
    createdAt: new Date('2024-05-01T12:00:00Z'),
  });

test('a complete record passes unchanged', () => {
  const input = valid();
  const result = checkRecord.run(input);
  assert.deepEqual(result, { ok: true, event: input });
});

test('empty, blank or reserved names are dropped as invalid_name', () => {
  for (const name of ['', '   ', 'session_start', 'session_end']) {
    assert.deepEqual(checkRecord.run({ ...valid(), name }), { ok: false, reason: 'invalid_name' }, name);
  }
});

test('an invalid date is dropped as invalid_timestamp', () => {
  assert.deepEqual(checkRecord.run({ ...valid(), createdAt: new Date('not a date') }), { ok: false, reason: 'invalid_timestamp' });
});

test('a record without project, device or profile is dropped as missing_identity', () => {
  for (const field of ['projectId', 'deviceId', 'profileId'] as const) {
    assert.deepEqual(checkRecord.run({ ...valid(), [field]: '' }), { ok: false, reason: 'missing_identity' }, field);
  }
});
