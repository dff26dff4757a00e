import nodemailer from 'nodemailer';
import type { Logger } from './logger.ts';

export interface Mail { to: string[]; subject: string; text: string }

/** Sends notification mail without holding up the caller; a mail that cannot be sent is logged with its recipients. */
export interface Mailer {
  send(mail: Mail): void;
  /** resolves when every mail handed over so far is sent or logged as failed */
  drain(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Mail goes over SMTP when `smtpUrl` is set (`smtp://user:pass@host:587`, `smtps://...`), with
 * STARTTLS when the server offers it. Without SMTP the mail is logged at info level, never dropped silently.
 */
export function createMailer(opts: { smtpUrl: string | null; mailFrom: string }, log: Logger): Mailer {
  const inFlight = new Set<Promise<void>>();
  const transport = opts.smtpUrl
    ? nodemailer.createTransport(opts.smtpUrl, { from: opts.mailFrom })
    : null;
  return {
    send(mail) {
      if (!transport) {
        log.info({ mail: { from: opts.mailFrom, ...mail } }, 'mail not sent: SMTP_URL is not configured');
        return;
      }
      const sending = transport.sendMail({ to: mail.to, subject: mail.subject, text: mail.text }).then(
        () => undefined,
        (err: Error) => log.error({ err: err.message, to: mail.to, subject: mail.subject }, 'mail could not be sent'),
      ).finally(() => inFlight.delete(sending));
      inFlight.add(sending);
    },
    async drain() {
      await Promise.all([...inFlight]);
    },
    async close() {
      await Promise.all([...inFlight]);
      transport?.close();
    },
  };
}
