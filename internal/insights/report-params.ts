// Query parameters of OpenPanel's report routes (pages/entry_exit, pages/performance, user_flow,
// groups): the period and filters every insights route takes, with OpenPanel's default period
// for these routes (30 days), plus each route's own parameters; a list parameter is taken
// repeated (`a=1&a=2`) or as a JSON array (`a=["1","2"]`), as OpenPanel's query parser does.
import { z } from 'zod';
import { BadRequestError } from '../http/errors';
import { noNul, periodParamsSchema, pickParams, RANGES } from '../query/params';

/** OpenPanel's period for these routes when neither range nor dates are given: the last 30 days. */
export const REPORT_DEFAULT_RANGE = '30d';
/** Longest text parameter (an event name, a search, a type). */
export const MAX_TEXT_PARAM = 2000;
/** Most names a list parameter (include, exclude) takes. */
export const MAX_LIST_ITEMS = 100;

export const textParam = z
  .string()
  .max(MAX_TEXT_PARAM, `At most ${MAX_TEXT_PARAM} characters`)
  .refine(noNul, 'Must not contain NUL characters');

/** A list of names: at most MAX_LIST_ITEMS, each a textParam. */
export const nameListParam = z.array(textParam).max(MAX_LIST_ITEMS, `At most ${MAX_LIST_ITEMS} values`);

/** The period and filters of the other insights routes, the period defaulting to 30 days; routes add theirs (safeExtend). */
export const reportPeriodSchema = periodParamsSchema.safeExtend({ range: z.enum(RANGES).default(REPORT_DEFAULT_RANGE) });

/**
 * The values of list parameter `name`: every repeated value, or the strings of one value that is
 * a JSON array (OpenPanel's parser reads JSON in any value); absent: undefined.
 */
function listValues(query: URLSearchParams, name: string): unknown {
  const values = query.getAll(name);
  if (values.length === 0) return undefined;
  if (values.length === 1 && values[0]!.trimStart().startsWith('[')) {
    try {
      return JSON.parse(values[0]!);
    } catch {
      return values; // not JSON: the text itself is a name
    }
  }
  return values;
}

/**
 * Parses `query` with `schema`: the first value of each of `names` (a repeated one: its first),
 * every value of each of `lists`; a BadRequestError naming the parameter on any invalid one.
 */
export function parseReportParams<S extends z.ZodType>(
  schema: S,
  query: URLSearchParams,
  names: readonly string[],
  lists: readonly string[] = [],
): z.infer<S> {
  const input: Record<string, unknown> = pickParams(query, ['startDate', 'endDate', 'range', 'filters', ...names]);
  for (const name of lists) {
    const value = listValues(query, name);
    if (value !== undefined) input[name] = value;
  }
  const result = schema.safeParse(input);
  if (!result.success) throw BadRequestError.fromZod(result.error);
  return result.data;
}
