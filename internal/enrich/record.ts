// Builds the record the worker hands to the enricher: identity, time, raw request
// fields set; every enrichment field at its "unknown" value ('' / null / false).
import type { EventRecord } from '../model/event';

export function blankEventRecord(partial: Partial<EventRecord> = {}): EventRecord {
  const record: EventRecord = {
    id: '',
    projectId: '',
    name: '',
    deviceId: '',
    profileId: '',
    createdAt: new Date(),
    properties: {},
    groups: [],
    ip: null,
    userAgent: null,
    deviceOverrides: null,
    serverSide: false,
    url: null,
    origin: '',
    path: '',
    title: '',
    referrer: '',
    referrer_name: '',
    referrer_type: '',
    utm_source: '',
    utm_medium: '',
    utm_campaign: '',
    utm_term: '',
    utm_content: '',
    device: '',
    browser: '',
    browser_version: '',
    os: '',
    os_version: '',
    brand: '',
    model: '',
    country: '',
    region: '',
    city: '',
    latitude: null,
    longitude: null,
    isBot: false,
    botReason: null,
    sessionId: null,
    durationMs: null,
  };
  // An explicit `undefined` in the partial keeps the default instead of breaking the type.
  // for-in, not Object.entries: the worker builds one record per event (no array per call).
  const fields = record as unknown as Record<string, unknown>;
  const given = partial as Record<string, unknown>;
  for (const key in given) {
    const value = given[key];
    if (value !== undefined) fields[key] = value;
  }
  return record;
}
