// Step checkRecord: the only step that drops. The API already refuses these; the worker
// checks again because a queued message may predate a rule or come from a replay.
import { RESERVED_EVENT_NAMES } from '../model/event';
import { drop, keep, type Step } from './step';

const RESERVED: ReadonlySet<string> = new Set(RESERVED_EVENT_NAMES);

export const checkRecord: Step = {
  name: 'checkRecord',
  run(event) {
    // The service emits session_start/session_end itself; a client's copy would double count.
    if (!event.name.trim() || RESERVED.has(event.name)) return drop('invalid_name');
    if (!(event.createdAt instanceof Date) || Number.isNaN(event.createdAt.getTime())) return drop('invalid_timestamp');
    // Without these the event can belong to no project, device or visitor.
    if (!event.projectId || !event.deviceId || !event.profileId) return drop('missing_identity');
    return keep(event);
  },
};
