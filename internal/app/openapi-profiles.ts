// OpenAPI entries of the events, sessions, profiles, profiles/{profileId}, .../sessions and
// .../metrics insights routes (internal/insights/raw-lists.ts, profiles.ts), added to the
// document by openapi.ts.
import { z } from 'zod';
import {
  eventsParamsSchema, MAX_ROWS, profileParamsSchema, profileSessionsParamsSchema, profilesParamsSchema, sessionsParamsSchema,
} from '../insights/raw-params';
import { ProfileMetrics, ProfileNotFound, ProfileWithEvents, RawEvent, RawProfile, RawSession } from '../insights/raw-rows';

/** openapi.ts' builder of one insights path (GET and its preflight). */
type InsightsPath = (summary: string, params: z.ZodType, response: z.ZodType) => unknown;

interface PathItem {
  get: { parameters: Array<{ name: string; [key: string]: unknown }>; responses: Record<string, unknown> } & Record<string, unknown>;
  [key: string]: unknown;
}

const notFound = {
  description: 'Unknown project ({"error", "message"}), or no such profile in the project: OpenPanel\'s body with Tidemark\'s message',
  content: { 'application/json': { schema: z.toJSONSchema(ProfileNotFound, { io: 'output', target: 'draft-2020-12' }) } },
};

/** A profiles/{profileId} path: the path parameter, and the 404 of an unknown profile. */
function ofProfile(item: unknown): PathItem {
  const path = item as PathItem;
  const [project, ...query] = path.get.parameters;
  return {
    ...path,
    get: {
      ...path.get,
      parameters: [project!, { name: 'profileId', in: 'path', required: true, schema: { type: 'string', maxLength: 2000 } }, ...query],
      responses: { ...path.get.responses, 404: notFound },
    },
  };
}

/** eventNames is a list: repeated, or one JSON array. */
function withListParam(item: unknown): PathItem {
  const path = item as PathItem;
  const parameters = path.get.parameters.map((p) =>
    p.name === 'eventNames'
      ? { ...p, style: 'form', explode: true, schema: { type: 'string' }, description: 'Event names; repeated (eventNames=a&eventNames=b) or one JSON array (eventNames=["a","b"])' }
      : p,
  );
  return { ...path, get: { ...path.get, parameters } };
}

export function profilePaths(insights: InsightsPath): Record<string, unknown> {
  return {
    '/insights/{projectId}/events': withListParam(insights(
      `Raw events of the period (OpenPanel's), newest first, at most ${MAX_ROWS}; no bots, no session_start / session_end`,
      eventsParamsSchema, z.array(RawEvent),
    )),
    '/insights/{projectId}/sessions': insights(
      `Sessions that started in the period (OpenPanel's), newest first, at most ${MAX_ROWS}; no bots`, sessionsParamsSchema, z.array(RawSession),
    ),
    '/insights/{projectId}/profiles': insights(
      `Stored profiles that meet every condition (OpenPanel's search), by created_at, at most ${MAX_ROWS}`, profilesParamsSchema, z.array(RawProfile),
    ),
    '/insights/{projectId}/profiles/{profileId}': ofProfile(insights(
      "A profile and its latest events (OpenPanel's); an id with events but no stored profile is an anonymous profile", profileParamsSchema, ProfileWithEvents,
    )),
    '/insights/{projectId}/profiles/{profileId}/sessions': ofProfile(insights(
      `The profile's sessions on all its devices, newest first, at most ${MAX_ROWS} (OpenPanel's)`, profileSessionsParamsSchema, z.array(RawSession),
    )),
    '/insights/{projectId}/profiles/{profileId}/metrics': ofProfile(insights(
      "The profile's activity in numbers (OpenPanel's profile metrics)", z.object({}), ProfileMetrics,
    )),
  };
}
