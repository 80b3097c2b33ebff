// How dimension names and values read on screen (the overview's panels and filter chips).
import type { Filter } from './state';

export const DIMENSION_LABELS: Record<string, string> = {
  path: 'Page', origin: 'Site', referrer_name: 'Referrer', referrer_type: 'Channel', referrer: 'Referrer URL',
  utm_source: 'UTM source', utm_medium: 'UTM medium', utm_campaign: 'UTM campaign', utm_term: 'UTM term', utm_content: 'UTM content',
  country: 'Country', region: 'Region', city: 'City', device: 'Device', browser: 'Browser', os: 'OS',
};
export const TAB_LABELS: Record<string, string> = {
  referrer_name: 'Referrers', referrer_type: 'Channels', referrer: 'URLs', utm_source: 'Source', utm_medium: 'Medium',
  utm_campaign: 'Campaign', utm_term: 'Term', utm_content: 'Content', country: 'Countries', region: 'Regions', city: 'Cities',
  device: 'Devices', browser: 'Browsers', os: 'OS',
};

const regionNames = (() => {
  try {
    return new Intl.DisplayNames(['en'], { type: 'region' });
  } catch {
    return null;
  }
})();

export function displayName(dimension: string, name: string): string {
  if (name === '') return dimension.startsWith('referrer') ? 'Direct / None' : '(not set)';
  if (dimension === 'country') {
    let n = name;
    try {
      n = regionNames?.of(name) ?? name;
    } catch {}
    return n;
  }
  if (dimension === 'device' || dimension === 'referrer_type') return name.charAt(0).toUpperCase() + name.slice(1);
  return name;
}

export function filterText(f: Filter): string {
  const values = f.value.map((v) => displayName(f.name, v)).join(' or ');
  return `${DIMENSION_LABELS[f.name] ?? f.name} ${f.operator === 'is' ? 'is' : 'is not'} ${values}`;
}
