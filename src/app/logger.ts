import { pino, type DestinationStream, type Logger } from 'pino';

export type { Logger };

/** The JSON log of a process: stdout, or `destination` (a test reading what was logged). */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options = { level, base: undefined, redact: ['psk', '*.psk', 'req.headers.authorization'] };
  return destination ? pino(options, destination) : pino(options);
}
