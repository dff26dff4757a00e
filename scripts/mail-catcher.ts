// `npm run mail-catcher`: an SMTP server for trying the service's mail on one machine (docs/walkthrough.md). It takes
// every mail it is sent, from anyone to anyone, prints it (sender, recipients, subject, text) and keeps it as
// <dir>/<n>-<recipient>.eml (as sent) and .txt (as printed), so a script can find it too. It relays nothing: no mail leaves this machine.
//   SMTP_URL=smtp://127.0.0.1:2525 npm start   # the service's mail goes here
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { SMTPServer } from 'smtp-server';
import { parseMail } from '../test/notifications/smtp.ts';
import { parseCli } from './cli.ts';

const { values, fail } = parseCli(
  {
    port: { type: 'string', default: '2525', number: true, placeholder: 'port', description: 'the SMTP port (SMTP_URL=smtp://127.0.0.1:<port>)' },
    host: { type: 'string', default: '127.0.0.1', placeholder: 'address', description: 'the address it listens on' },
    dir: {
      type: 'string',
      default: 'data/mail',
      placeholder: 'path',
      description: 'where each mail is kept, as <n>-<recipient>.eml (as sent) and .txt (decoded)',
    },
  },
  {
    usage: `usage: npm run mail-catcher -- [options]
An SMTP server for trying the service's mail on one machine: it takes every mail, prints it (sender, recipients,
subject, text) and keeps it in --dir; it sends nothing on. Start the service with SMTP_URL=smtp://127.0.0.1:2525.`,
  },
);
const port = Number(values.port);
if (!Number.isInteger(port) || port < 0 || port > 65535) fail(`--port takes a port number, not ${values.port}`);
const dir = path.resolve(values.dir);
mkdirSync(dir, { recursive: true });

// numbered on from the mails a previous run left, so none is overwritten
let received = readdirSync(dir).filter((f) => /^\d+-.*\.eml$/.test(f)).length;
const server = new SMTPServer({
  // the service connects without TLS and without credentials (smtp://host:port); any login is taken too
  authOptional: true,
  disabledCommands: ['STARTTLS'],
  logger: false,
  onAuth: (_auth, _session, callback) => callback(null, { user: 'anyone' }),
  onData: (stream, session, callback) => {
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const to = session.envelope.rcptTo.map((r) => r.address);
      const from = session.envelope.mailFrom ? session.envelope.mailFrom.address : '';
      const { subject, text } = parseMail(raw);
      received += 1;
      // the number first: `ls` lists the mails in the order they came; .eml as sent, .txt as printed (decoded)
      const file = path.join(dir, `${String(received).padStart(4, '0')}-${(to[0] ?? 'nobody').replace(/[^\w.@-]/g, '_')}`);
      const shown = `From: ${from}\nTo: ${to.join(', ')}\nSubject: ${subject}\n\n${text}\n`;
      writeFileSync(`${file}.eml`, raw);
      writeFileSync(`${file}.txt`, shown);
      process.stdout.write(`── mail ${received} ── ${file}.eml\n${shown}\n`);
      callback();
    });
  },
});
let listening = false;
// a port that cannot be taken ends the catcher; a client's broken connection later is only reported
server.on('error', (err) => {
  process.stderr.write(`mail-catcher: ${err.message}\n`);
  if (!listening) process.exit(1);
});
server.listen(port, values.host, () => {
  listening = true;
  const address = server.server.address();
  const bound = typeof address === 'object' && address ? address.port : port;
  process.stdout.write(`mail-catcher: listening on smtp://${values.host}:${bound}, keeping mail in ${dir}\n`);
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => server.close(() => process.exit(0)));
