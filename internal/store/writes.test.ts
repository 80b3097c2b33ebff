// The COPY text of a batch's events (no database: test/ stores and reads them back).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { blankEventRecord } from '../enrich/record';
import { SESSION_DIMENSIONS, type EventRecord } from '../model/event';
import { arrayLiteral, copyField, eventColumnValues, eventsCopyText } from './event-inserts';

/** The plain definition: every column's value (eventColumnValues), groups as a text[] literal, each through copyField. */
function reference(events: EventRecord[]): string {
  return events
    .map((e) => {
      const values = eventColumnValues(e);
      values[8] = arrayLiteral(e.groups);
      return values.map(copyField).join('\t') + '\n';
    })
    .join('');
}

// Text with the characters COPY escapes, quotes, and beyond the BMP.
const text = fc.string({ unit: fc.constantFrom('a', 'é', '\\', '\n', '\r', '\t', '"', ',', '{', '😀', ' ', 'N'), maxLength: 12 });
const nullableText = fc.option(text, { nil: null });
const nullableNumber = fc.option(fc.oneof(fc.integer(), fc.double({ noNaN: true })), { nil: null });

const event = fc
  .record({
    id: text, projectId: text, name: text, deviceId: text, profileId: text, sessionId: nullableText,
    createdAt: fc.date({ min: new Date('2000-01-01'), max: new Date('2100-01-01'), noInvalidDate: true }),
    properties: fc.dictionary(text, fc.oneof(text, fc.integer(), fc.boolean())),
    groups: fc.array(text, { maxLength: 3 }),
    origin: text, path: text, title: text,
    dimensions: fc.array(text, { minLength: SESSION_DIMENSIONS.length, maxLength: SESSION_DIMENSIONS.length }),
    latitude: nullableNumber, longitude: nullableNumber, isBot: fc.boolean(),
    botReason: fc.option(fc.constantFrom('user-agent', 'header'), { nil: null }), durationMs: fc.option(fc.integer({ min: 0 }), { nil: null }),
  })
  .map(({ dimensions, botReason, ...r }) => {
    const e = blankEventRecord({ ...r, botReason: botReason as EventRecord['botReason'] });
    SESSION_DIMENSIONS.forEach((d, i) => (e[d] = dimensions[i]!));
    return e;
  });

test('eventsCopyText writes every column as copyField does over eventColumnValues, in order, for any text', () => {
  fc.assert(fc.property(fc.array(event, { maxLength: 4 }), (events) => assert.equal(eventsCopyText(events), reference(events))), { numRuns: 500 });
});

test('COPY text escapes backslash, newline, carriage return and tab, and writes NULL as \\N', () => {
  const e = blankEventRecord({ id: 'i', title: 'a\\b\nc\rd\te', sessionId: null, durationMs: 12 });
  const fields = eventsCopyText([e]).slice(0, -1).split('\t');
  assert.equal(fields.length, eventColumnValues(e).length);
  assert.equal(fields[11], 'a\\\\b\\nc\\rd\\te');
  assert.equal(fields[5], '\\N');
  assert.equal(fields.at(-1), '12');
});
