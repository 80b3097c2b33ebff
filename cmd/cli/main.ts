import { loadConfig } from '../../internal/config/config';
import { runCli, UsageError } from '../../internal/cli/cli';

try {
  const out = await runCli(process.argv.slice(2), loadConfig());
  process.stdout.write(`${JSON.stringify(out)}\n`);
  process.exit(0);
} catch (err) {
  process.stderr.write(`tidemark cli: ${(err as Error).message}\n`);
  process.exit(err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS') ? 2 : 1);
}
