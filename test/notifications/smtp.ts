// A real SMTP server for the notification tests: it records every mail it takes (envelope, subject,
// decoded text), refuses the recipients it is told to with a 550, and can be stopped and started again
// on the same port to play an outage.

import type { AddressInfo } from 'node:net';
import { Queue } from 'bullmq';
import { SMTPServer } from 'smtp-server';
import type { AppContext } from '../../src/app/context.ts';
import { mailQueue } from '../../src/mail/queue.ts';

export interface ReceivedMail {
  to: string[];
  subject: string;
  text: string;
  raw: string;
}

function decodeWords(value: string): string {
  return value.replace(/=\?([^?]+)\?([BbQq])\?([^?]*)\?=\s*/g, (_all, _charset: string, enc: string, data: string) =>
    enc.toUpperCase() === 'B'
      ? Buffer.from(data, 'base64').toString('utf8')
      : Buffer.from(
          data.replace(/_/g, ' ').replace(/=([0-9A-Fa-f]{2})/g, (_m, h: string) => String.fromCharCode(parseInt(h, 16))),
          'latin1',
        ).toString('utf8'),
  );
}

function decodeBody(body: string, encoding: string): string {
  if (encoding === 'base64') return Buffer.from(body.replace(/\s+/g, ''), 'base64').toString('utf8');
  if (encoding === 'quoted-printable') {
    const soft = body.replace(/=\r?\n/g, '');
    return Buffer.from(
      soft.replace(/=([0-9A-Fa-f]{2})/g, (_m, h: string) => String.fromCharCode(parseInt(h, 16))),
      'latin1',
    ).toString('utf8');
  }
  return body;
}

/** Subject and text of a single-part mail as nodemailer writes it. */
export function parseMail(raw: string): { subject: string; text: string } {
  const split = raw.indexOf('\r\n\r\n');
  const head = raw.slice(0, split).replace(/\r\n[ \t]+/g, ' ');
  const header = (name: string) =>
    head
      .split('\r\n')
      .find((l) => l.toLowerCase().startsWith(`${name.toLowerCase()}:`))
      ?.slice(name.length + 1)
      .trim() ?? '';
  const text = decodeBody(raw.slice(split + 4), header('Content-Transfer-Encoding').toLowerCase())
    .replace(/\r\n/g, '\n')
    .replace(/\n$/, '');
  return { subject: decodeWords(header('Subject')), text };
}

export class TestSmtp {
  readonly mails: ReceivedMail[] = [];
  /** recipients answered 550 */
  readonly refuse = new Set<string>();
  port = 0;
  private server: SMTPServer | null = null;

  async start(port = 0): Promise<void> {
    const server = new SMTPServer({
      authOptional: true,
      disabledCommands: ['STARTTLS'],
      logger: false,
      closeTimeout: 100,
      onRcptTo: (address, _session, callback) => {
        if (this.refuse.has(address.address)) callback(Object.assign(new Error(`<${address.address}>: mailbox unavailable`), { responseCode: 550 }));
        else callback();
      },
      onData: (stream, session, callback) => {
        const chunks: Buffer[] = [];
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('end', () => {
          const raw = Buffer.concat(chunks).toString('utf8');
          this.mails.push({ to: session.envelope.rcptTo.map((r) => r.address), ...parseMail(raw), raw });
          callback();
        });
      },
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    this.port = (server.server.address() as AddressInfo).port;
    this.server = server;
  }

  /** Closes the port and every open connection: clients see a server that is away. */
  async stop(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  url(): string {
    return `smtp://127.0.0.1:${this.port}`;
  }

  to(address: string): ReceivedMail[] {
    return this.mails.filter((m) => m.to.includes(address));
  }
}

/** After a test file: its mail queue emptied (nothing of it left for the next run on this Redis), then closed. */
export async function dropMailQueue(ctx: AppContext): Promise<void> {
  const queue = new Queue(mailQueue(ctx).name, { connection: ctx.redis, prefix: mailQueue(ctx).prefix });
  await queue.obliterate({ force: true }).catch(() => undefined);
  await queue.close();
}
