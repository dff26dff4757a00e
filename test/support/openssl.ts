import { spawn } from 'node:child_process';

export interface RawHttpResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Parses the first HTTP/1.1 response out of raw bytes (Content-Length framed). */
export function parseHttpResponse(raw: string): RawHttpResponse {
  const end = raw.indexOf('\r\n\r\n');
  if (end < 0) throw new Error(`no HTTP response in: ${raw.slice(0, 300)}`);
  const [statusLine, ...lines] = raw.slice(0, end).split('\r\n');
  const headers: Record<string, string> = {};
  for (const l of lines) {
    const i = l.indexOf(':');
    headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
  }
  const length = Number(headers['content-length'] ?? raw.length - end - 4);
  return { status: Number(statusLine.split(' ')[1]), headers, body: raw.slice(end + 4, end + 4 + length) };
}

export function httpRequestText(method: string, path: string, body: string | null, contentType = 'application/json', close = true): string {
  const head = [`${method} ${path} HTTP/1.1`, 'Host: device.test'];
  if (body !== null) head.push(`Content-Type: ${contentType}`, `Content-Length: ${Buffer.byteLength(body)}`);
  if (close) head.push('Connection: close');
  return `${head.join('\r\n')}\r\n\r\n${body ?? ''}`;
}

/** Runs `openssl s_client` with a PSK over TLS 1.2, writes `input`, returns what came back. */
export function opensslPsk(opts: {
  port: number;
  identity: string;
  keyHex: string;
  cipher?: string;
  input: string;
  timeoutMs?: number;
}): Promise<{ stdout: string; stderr: string; code: number | null }> {
  return new Promise((resolve) => {
    const child = spawn('openssl', [
      's_client',
      '-connect',
      `127.0.0.1:${opts.port}`,
      '-tls1_2',
      '-quiet',
      '-psk',
      opts.keyHex,
      '-psk_identity',
      opts.identity,
      '-cipher',
      opts.cipher ?? 'PSK-AES128-GCM-SHA256',
    ]);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString('latin1');
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 15_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ stdout, stderr, code });
    });
    child.stdin.write(opts.input);
  });
}
