// Structured JSON logs (pino). Secrets never reach a log line: credential headers are redacted.
import { pino, type Logger } from 'pino';

export type { Logger };

export function createLogger(level: string, base: Record<string, unknown> = {}): Logger {
  return pino({
    level,
    base: { service: 'tidemark', ...base },
    redact: {
      paths: ['secret', 'clientSecret', '*.secret', '*.clientSecret', 'headers["service-client-secret"]', 'headers["openpanel-client-secret"]', 'password'],
      censor: '[redacted]',
    },
    timestamp: pino.stdTimeFunctions.isoTime,
  });
}
