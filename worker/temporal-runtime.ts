import { Runtime, type Logger as TemporalLogger, type LogLevel, type LogMetadata } from '@temporalio/worker';
import type { Logger } from 'pino';

let installed = false;

/**
 * Routes the Temporal SDK's logs (TypeScript side and Rust core) into our pino logger, so a worker
 * logs structured JSON like the rest of the service. Must run before the first Worker or
 * NativeConnection; the Runtime is process-wide, so later calls are no-ops.
 */
export function installTemporalRuntime(log: Logger): void {
  if (installed) return;
  installed = true;
  const to = (level: 'trace' | 'debug' | 'info' | 'warn' | 'error') => (message: string, meta?: LogMetadata) =>
    log[level]({ ...meta }, message);
  const logger: TemporalLogger = {
    log: (level: LogLevel, message: string, meta?: LogMetadata) => to(level.toLowerCase() as 'info')(message, meta),
    trace: to('trace'),
    debug: to('debug'),
    info: to('info'),
    warn: to('warn'),
    error: to('error'),
  };
  Runtime.install({ logger, telemetryOptions: { logging: { filter: { core: 'WARN', other: 'ERROR' }, forward: {} } } });
}
