// Builds the dashboard (internal/dashboard/ui, TypeScript + CSS + uPlot) with esbuild, in
// memory, the first time /dashboard is asked for; the page is one HTML document with the
// script and styles inline. Nothing generated is committed or written to disk, so
// `npm ci && npm start` on a fresh clone serves it (esbuild is a dependency; ~100 ms).
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const UI = path.join(path.dirname(fileURLToPath(import.meta.url)), 'ui');

/** `</script` or `</style` inside inlined code would end the element early. */
const inline = (code: string, tag: 'script' | 'style') => code.replace(new RegExp(`</${tag}`, 'gi'), `<\\/${tag}`);

async function buildDashboardHtml(): Promise<string> {
  const result = await build({
    entryPoints: [path.join(UI, 'main.ts')],
    bundle: true,
    minify: true,
    format: 'iife',
    target: 'es2020',
    outdir: 'out',
    write: false,
    logLevel: 'silent',
    legalComments: 'none',
  });
  const js = result.outputFiles.find((f) => f.path.endsWith('.js'))?.text ?? '';
  const css = result.outputFiles.find((f) => f.path.endsWith('.css'))?.text ?? '';
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Tidemark</title>
<link rel="icon" href="data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 16 16'%3E%3Crect width='16' height='16' rx='5' fill='%234f46e5'/%3E%3Crect x='3' y='10' width='10' height='3' rx='1.5' fill='white'/%3E%3C/svg%3E">
<style>${inline(css, 'style')}</style>
</head>
<body>
<div id="app"><noscript>The Tidemark dashboard needs JavaScript.</noscript></div>
<script>${inline(js, 'script')}</script>
</body>
</html>
`;
}

/** The page, built once per process on first use and kept. */
export class DashboardPage {
  private page: Promise<string> | null = null;

  html(): Promise<string> {
    this.page ??= buildDashboardHtml().catch((err: unknown) => {
      this.page = null; // try again on the next request
      throw err;
    });
    return this.page;
  }
}
