import { readFileSync } from 'node:fs';
import { rootCertificates } from 'node:tls';
import { Agent, request } from 'undici';
import { typedBody } from '../sandbox/web-request.ts';
import type { ExecCall, TypedBody } from '../sandbox/types.ts';

// exec.sendRequest: the sandbox only records the call; the worker makes the request here, after
// the run, and the outcome goes onto the run's activity. Only HTTPS, only to the deployment's
// allowed hosts, bounded in time and in the response bytes kept.

export type SendRequestArgs = Extract<ExecCall, { name: 'sendRequest' }>['args'];

export interface OutboundOptions {
  /** lower case; `*.example.com` matches every subdomain of example.com */
  allowedHosts: string[];
  timeoutMs: number;
  maxResponseBytes: number;
  /** PEM of extra CA certificates to trust besides Node's bundled roots */
  extraCa?: string | null;
}

/** What the activity log shows of one outbound request. */
export interface OutboundOutcome {
  failed: boolean;
  /** one line: `POST https://host/path → 200 in 35 ms`, or why it was not made or failed */
  message: string;
  triggerData: {
    request: { url: string; method: string; headers: Record<string, string | string[]>; body: TypedBody | null };
    response: { statusCode: number; headers: Record<string, string | string[]>; body: TypedBody | null; truncated: boolean } | null;
    durationMs: number | null;
    error: string | null;
  };
}

/** Hosts a run may reach in one activity: more sendRequest calls than this are refused, each visibly. */
export const MAX_REQUESTS_PER_RUN = 10;

export function hostAllowed(hostname: string, allowed: string[]): boolean {
  const host = hostname.toLowerCase().replace(/^\[|\]$/g, '');
  return allowed.some((entry) => (entry.startsWith('*.') ? host.endsWith(entry.slice(1)) && host.length > entry.length - 1 : host === entry));
}

const CONTENT_TYPES: Record<TypedBody['type'], string> = { json: 'application/json', string: 'text/plain; charset=utf-8', hex: 'application/octet-stream' };

function encodeBody(body: TypedBody | null): Buffer | undefined {
  if (!body) return undefined;
  if (body.type === 'hex') return Buffer.from(body.data, 'hex');
  if (body.type === 'string') return Buffer.from(body.data, 'utf8');
  return Buffer.from(JSON.stringify(body.data), 'utf8');
}

const HTTP_TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

function refused(args: SendRequestArgs, error: string): OutboundOutcome {
  return { failed: true, message: `${args.method} ${args.url} refused: ${error}`, triggerData: { request: args, response: null, durationMs: null, error } };
}

export class OutboundClient {
  private readonly options: OutboundOptions;
  private readonly agent: Agent;

  constructor(options: OutboundOptions) {
    this.options = options;
    this.agent = new Agent({
      connect: { ca: options.extraCa ? [...rootCertificates, options.extraCa] : undefined, timeout: options.timeoutMs },
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
      connections: 64,
    });
  }

  /** Reads the options of a deployment's configuration (OUTBOUND_*). */
  static fromConfig(config: {
    outboundAllowedHosts: string[];
    outboundTimeoutMs: number;
    outboundMaxResponseBytes: number;
    outboundCaFile: string | null;
  }): OutboundClient {
    return new OutboundClient({
      allowedHosts: config.outboundAllowedHosts,
      timeoutMs: config.outboundTimeoutMs,
      maxResponseBytes: config.outboundMaxResponseBytes,
      extraCa: config.outboundCaFile ? readFileSync(config.outboundCaFile, 'utf8') : null,
    });
  }

  /** The outcome `send` would have without sending: its refusal, or the request as it would go out (a dry run's). */
  wouldSend(args: SendRequestArgs): OutboundOutcome {
    const checked = this.check(args);
    if (typeof checked === 'string') return refused(args, checked);
    return {
      failed: false,
      message: `${args.method} ${args.url}: not sent (dry run)`,
      triggerData: { request: args, response: null, durationMs: null, error: null },
    };
  }

  /** The URL of a request this deployment may make, or why not. */
  private check(args: SendRequestArgs): URL | string {
    let url: URL;
    try {
      url = new URL(args.url);
    } catch {
      return 'url is not an absolute URL';
    }
    if (url.protocol !== 'https:') return `only https URLs are allowed, not ${url.protocol.replace(/:$/, '')}`;
    if (url.username || url.password) return 'credentials in the URL are not allowed; send them in a header';
    if (!hostAllowed(url.hostname, this.options.allowedHosts)) {
      return this.options.allowedHosts.length === 0
        ? 'this deployment allows no outbound hosts (OUTBOUND_ALLOWED_HOSTS is empty)'
        : `host ${url.hostname} is not in OUTBOUND_ALLOWED_HOSTS`;
    }
    if (!HTTP_TOKEN.test(args.method)) return `method ${JSON.stringify(args.method)} is not an HTTP method`;
    return url;
  }

  /**
   * Makes the request, or refuses it; never throws: every outcome is something to show on the activity.
   * `idempotencyKey` (stable when a failed job is retried and the request made again) goes out as
   * `Idempotency-Key` unless the handler set that header itself.
   */
  async send(args: SendRequestArgs, idempotencyKey?: string): Promise<OutboundOutcome> {
    const triggerData: OutboundOutcome['triggerData'] = { request: args, response: null, durationMs: null, error: null };
    const checked = this.check(args);
    if (typeof checked === 'string') return refused(args, checked);
    const url = checked;
    const headers: Record<string, string | string[]> = { ...args.headers };
    const has = (name: string) => Object.keys(headers).some((h) => h.toLowerCase() === name);
    if (idempotencyKey && !has('idempotency-key')) headers['idempotency-key'] = idempotencyKey;
    if (args.body && !has('content-type')) headers['content-type'] = CONTENT_TYPES[args.body.type];

    const started = performance.now();
    const signal = AbortSignal.timeout(this.options.timeoutMs);
    try {
      const res = await request(url, {
        method: args.method,
        headers,
        body: encodeBody(args.body),
        dispatcher: this.agent,
        signal,
        maxRedirections: 0,
      } as Parameters<typeof request>[1]);
      const chunks: Buffer[] = [];
      let kept = 0;
      let truncated = false;
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        const room = this.options.maxResponseBytes - kept;
        if (chunk.length > room) {
          if (room > 0) chunks.push(chunk.subarray(0, room));
          kept += Math.max(0, room);
          truncated = true;
          break;
        }
        chunks.push(chunk);
        kept += chunk.length;
      }
      // leaving the loop early ends the stream: the rest of the response is never read
      if (truncated) res.body.destroy();
      const durationMs = Math.round(performance.now() - started);
      const responseHeaders = res.headers as Record<string, string | string[]>;
      const contentType = responseHeaders['content-type'];
      const body = typedBody(Buffer.concat(chunks), Array.isArray(contentType) ? contentType[0] : contentType) ?? null;
      return {
        failed: false,
        message: `${args.method} ${args.url} → ${res.statusCode} in ${durationMs} ms${truncated ? ` (response cut off after ${this.options.maxResponseBytes} bytes)` : ''}`,
        triggerData: { ...triggerData, response: { statusCode: res.statusCode, headers: responseHeaders, body, truncated }, durationMs },
      };
    } catch (err) {
      const durationMs = Math.round(performance.now() - started);
      const e = err as Error & { code?: string; cause?: { code?: string; message?: string } };
      const error =
        signal.aborted ||
        e.name === 'TimeoutError' ||
        e.code === 'UND_ERR_HEADERS_TIMEOUT' ||
        e.code === 'UND_ERR_BODY_TIMEOUT' ||
        e.code === 'UND_ERR_CONNECT_TIMEOUT'
          ? `no complete answer within OUTBOUND_TIMEOUT_MS (${this.options.timeoutMs} ms)`
          : [e.code, e.message, e.cause?.message].filter(Boolean).join(': ');
      return {
        failed: true,
        message: `${args.method} ${args.url} failed after ${durationMs} ms: ${error}`,
        triggerData: { ...triggerData, durationMs, error },
      };
    }
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}
