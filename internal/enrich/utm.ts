// Step putUtm: the five utm_* tags from the page URL's query string ('' when absent).
import type { SourceFields } from '../model/event';
import { keep, type Step } from './step';
import { splitUrl } from './url';

type UtmFields = Pick<SourceFields, 'utm_source' | 'utm_medium' | 'utm_campaign' | 'utm_term' | 'utm_content'>;

export function parseUtm(url: string | null | undefined): UtmFields {
  // Works the same for absolute URLs, bare paths and malformed URLs; URLSearchParams never throws.
  const params = new URLSearchParams(url ? splitUrl(url.trim()).query : '');
  return {
    utm_source: params.get('utm_source') ?? '',
    utm_medium: params.get('utm_medium') ?? '',
    utm_campaign: params.get('utm_campaign') ?? '',
    utm_term: params.get('utm_term') ?? '',
    utm_content: params.get('utm_content') ?? '',
  };
}

export const putUtm: Step = {
  name: 'putUtm',
  run(event) {
    return keep({ ...event, ...parseUtm(event.url) });
  },
};
