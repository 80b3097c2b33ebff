export type Level = 'error' | 'warning';

export interface Finding {
  level: Level;
  /** what the finding is about: a file, or Kind/namespace/name */
  where: string;
  message: string;
}

export interface Report {
  /** what was validated, e.g. "overlay dev" or "deploy/compose.yaml" */
  target: string;
  ok: boolean;
  findings: Finding[];
  /** one line: what was checked */
  summary: string;
}

export class Findings {
  readonly list: Finding[] = [];
  error(where: string, message: string): void {
    this.list.push({ level: 'error', where, message });
  }
  warn(where: string, message: string): void {
    this.list.push({ level: 'warning', where, message });
  }
  get errors(): number {
    return this.list.filter((f) => f.level === 'error').length;
  }
  report(target: string, summary: string): Report {
    return { target, ok: this.errors === 0, findings: this.list, summary };
  }
}

export function formatReport(r: Report): string {
  const lines = [`${r.ok ? 'PASS' : 'FAIL'} ${r.target}: ${r.summary}`];
  for (const f of r.findings) lines.push(`  ${f.level === 'error' ? 'ERROR' : 'warn '} ${f.where}: ${f.message}`);
  return lines.join('\n');
}
