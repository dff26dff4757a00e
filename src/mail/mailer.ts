import type { AppContext } from '../app/context.ts';
import { queueMails } from './queue.ts';

export interface Mail {
  to: string[];
  subject: string;
  text: string;
  environmentId?: number;
}

/** Hands command mail to the mail queue without holding up the caller; a mail that cannot be queued is logged with its recipients. */
export interface Mailer {
  send(mail: Mail): void;
  /** resolves when every mail handed over so far is queued (or logged as not queued) */
  drain(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Command mails go the way of every notification (src/mail/queue.ts): stored, queued in
 * Redis, sent over SMTP_URL with retries; without SMTP_URL they are logged at info level and stored as failed.
 */
export function createMailer(ctx: AppContext): Mailer {
  const inFlight = new Set<Promise<void>>();
  return {
    send(mail) {
      const queuing = queueMails(ctx, [
        { environmentId: mail.environmentId ?? null, accountId: null, kind: 'command', to: mail.to, subject: mail.subject, text: mail.text },
      ])
        .then(
          () => undefined,
          (err: Error) => ctx.log.error({ err: err.message, to: mail.to, subject: mail.subject }, 'mail could not be queued'),
        )
        .finally(() => inFlight.delete(queuing));
      inFlight.add(queuing);
    },
    async drain() {
      await Promise.all([...inFlight]);
    },
    async close() {
      await Promise.all([...inFlight]);
    },
  };
}
