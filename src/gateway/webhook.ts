// Supplier webhooks on the HTTPS device port: a third party (a LoRaWAN network server, a vendor's
// cloud) posts to https://<host>:<port>/webhook/<webhookHashId>/<secret>[/rest]. The request is
// authenticated by the secret in the URL (no PSK, no client certificate), the webhook's identifier
// function names the device (found or created), and from there it is a device request like any
// other: queued durably, the device type's handler answers it.
//
// Order of the checks: path → webhook → secret → body size, so an unauthenticated sender never
// gets a body read; nothing is queued before the identifier has named a device.

import type http from 'node:http';
import type { AppContext } from '../app/context.ts';
import { AppError } from '../app/errors.ts';
import { TtlCache } from '../app/ttl-cache.ts';
import { findOrCreateDevice, type FoundDevice } from '../connectivity/devices/find-or-create.ts';
import { loadWebhookTarget, openWebhookSecret, secretMatches } from '../connectivity/webhooks/store.ts';
import type { DeviceQueue } from '../pipeline/queue.ts';
import { describeRunError, Sandbox, sandboxFromConfig } from '../sandbox/runner.ts';
import type { WebRequest } from '../sandbox/types.ts';
import { metrics } from '../app/metrics.ts';
import { readBounded, refuseRestOfBody } from './request-body.ts';
import { encodeAnswerBody, parseQuery, typedBody, webRequest } from '../sandbox/web-request.ts';
import { supplierAlerts } from '../notifications/supplier-alerts.ts';

/** A webhook request as it came off the wire (body already read). */
export interface WebhookHttpRequest {
  method: string;
  /** path and query, as in the request line */
  url: string;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  ip: string;
}

export interface HttpAnswer {
  statusCode: number;
  headers: Record<string, string | number>;
  payload: Buffer;
}

export interface WebhookHandlerOptions {
  /** how long a webhook (code, secret) and the device an identifier named are reused; default 2000 ms */
  cacheTtlMs?: number;
  /** default: one of its own, with the configured limits */
  sandbox?: Sandbox;
}

interface Target {
  hashId: string;
  environmentId: number;
  environmentHashId: string;
  identifier: string;
  secret: string;
}

const PREFIX = '/webhook/';

/** True for a request line the webhook handler serves: `/webhook/...`. */
export const isWebhookPath = (url: string | undefined): boolean => (url ?? '').startsWith(PREFIX);

/** `/webhook/<hashId>/<secret>[/rest][?query]` → its parts; `path` is what the handler sees, `/` when none. */
export function parseWebhookUrl(url: string): { hashId: string; secret: string; path: string; search: URLSearchParams } | null {
  const parsed = new URL(url, 'https://webhook.invalid');
  if (!parsed.pathname.startsWith(PREFIX)) return null;
  const [hashId, secret, ...rest] = parsed.pathname.slice(PREFIX.length).split('/');
  if (!hashId || !secret) return null;
  return { hashId, secret, path: `/${rest.join('/')}`, search: parsed.searchParams };
}

function json(statusCode: number, key: string, message: string): HttpAnswer {
  const payload = Buffer.from(JSON.stringify({ key, message }));
  return { statusCode, headers: { 'content-type': 'application/json', 'content-length': payload.length }, payload };
}

const NOT_FOUND = () => json(404, 'not_found_error', 'no webhook at this URL');

/** Serves webhook URLs on a connection that carries no device session. */
export class WebhookHandler {
  private readonly ctx: AppContext;
  private readonly queue: Pick<DeviceQueue, 'addAndWait'>;
  private readonly sandbox: Sandbox;
  private readonly ownSandbox: boolean;
  private readonly targets: TtlCache<Target | null>;
  private readonly devices: TtlCache<FoundDevice>;

  constructor(ctx: AppContext, queue: Pick<DeviceQueue, 'addAndWait'>, opts: WebhookHandlerOptions = {}) {
    this.ctx = ctx;
    this.queue = queue;
    this.ownSandbox = !opts.sandbox;
    this.sandbox = opts.sandbox ?? sandboxFromConfig(ctx.config, ctx.log);
    const ttl = opts.cacheTtlMs ?? 2000;
    this.targets = new TtlCache(ttl);
    this.devices = new TtlCache(ttl);
  }

  /** Reads the body (bounded by DEVICE_BODY_LIMIT_BYTES) once the sender is authenticated, and writes the answer. */
  async serve(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    let answer: HttpAnswer;
    try {
      const checked = await this.authenticate(req.url ?? '/');
      if ('statusCode' in checked) {
        answer = checked;
      } else {
        const body = await readBounded(req, res, this.ctx.config.deviceBodyLimitBytes);
        answer =
          body === null
            ? this.tooLarge()
            : await this.process(checked.target, checked.url, {
                method: req.method ?? 'GET',
                url: req.url ?? '/',
                headers: req.headers,
                body,
                ip: req.socket.remoteAddress ?? '',
              });
      }
    } catch (err) {
      this.ctx.log.error({ err: (err as Error).message }, 'webhook request failed');
      answer = json(503, 'unavailable_error', 'the request could not be queued; try again');
    }
    if (res.headersSent) return;
    // an unread body (refused before reading) must not be taken for the next request on the connection,
    // nor cut off under a sender still writing it
    refuseRestOfBody(req, res);
    res.writeHead(answer.statusCode, answer.headers);
    res.end(answer.payload);
  }

  /** The answer to one webhook request whose body has been read: every check, then the pipeline. */
  async handle(request: WebhookHttpRequest): Promise<HttpAnswer> {
    const checked = await this.authenticate(request.url);
    if ('statusCode' in checked) return checked;
    if (request.body.length > this.ctx.config.deviceBodyLimitBytes) return this.tooLarge();
    return this.process(checked.target, checked.url, request);
  }

  close(): void {
    if (this.ownSandbox) this.sandbox.dispose();
  }

  private tooLarge(): HttpAnswer {
    return json(413, 'parameter_error', `body exceeds ${this.ctx.config.deviceBodyLimitBytes} bytes (DEVICE_BODY_LIMIT_BYTES)`);
  }

  private async authenticate(rawUrl: string): Promise<HttpAnswer | { target: Target; url: NonNullable<ReturnType<typeof parseWebhookUrl>> }> {
    const url = parseWebhookUrl(rawUrl);
    if (!url) return NOT_FOUND();
    const target = await this.targets.get(url.hashId, async () => {
      const row = await loadWebhookTarget(this.ctx.db, url.hashId);
      if (!row) return null;
      return {
        hashId: row.hashId,
        environmentId: row.environmentId,
        environmentHashId: row.environmentHashId,
        identifier: row.identifier,
        secret: openWebhookSecret(this.ctx, row.hashId, row.secretSealed),
      };
    });
    if (!target) return NOT_FOUND();
    if (!secretMatches(url.secret, target.secret)) return json(401, 'authentication_error', 'wrong secret for this webhook');
    return { target, url };
  }

  private async process(target: Target, url: NonNullable<ReturnType<typeof parseWebhookUrl>>, request: WebhookHttpRequest): Promise<HttpAnswer> {
    const host = request.headers.host;
    const web: WebRequest = webRequest({
      url: { protocol: 'https', host: typeof host === 'string' ? host : '', path: url.path, query: parseQuery(url.search) },
      method: request.method.toUpperCase(),
      headers: Object.fromEntries(Object.entries(request.headers).filter((e): e is [string, string | string[]] => e[1] !== undefined)),
      body: typedBody(request.body, headerString(request.headers['content-type'])),
      ip: request.ip,
    });
    metrics.deviceRequests.inc({ protocol: 'webhook' });

    const run = await this.sandbox.runIdentifier({ isolationKey: target.environmentHashId, source: target.identifier, args: { request: web } });
    if (!run.ok) {
      this.ctx.log.warn(
        { webhookHashId: target.hashId, environmentHashId: target.environmentHashId, kind: run.error.kind, error: run.error.message, logs: run.logs },
        'webhook identifier failed',
      );
      supplierAlerts(this.ctx).record([
        {
          objectType: 'supplierWebhook',
          objectHashId: target.hashId,
          message: describeRunError(run.error),
          deviceId: null,
          activityHashId: null,
          at: new Date(),
        },
      ]);
      return json(400, 'identifier_error', `the webhook's identifier function failed: ${describeRunError(run.error)}`);
    }
    const { deviceTypeHashId, deviceIdentifier } = run.result;
    let device: FoundDevice;
    try {
      device = await this.devices.get(`${target.environmentId}\n${deviceTypeHashId}\n${deviceIdentifier}`, () =>
        findOrCreateDevice(this.ctx, {
          environmentId: target.environmentId,
          environmentHashId: target.environmentHashId,
          deviceTypeHashId,
          supplierDeviceIdentifier: deviceIdentifier,
        }),
      );
    } catch (err) {
      if (!(err instanceof AppError) || err.status >= 500) throw err;
      this.ctx.log.warn({ webhookHashId: target.hashId, error: err.message }, 'webhook identifier named no usable device');
      return json(err.status, err.key, `the webhook's identifier returned ${JSON.stringify(run.result)}: ${err.message}`);
    }

    const outcome = await this.queue.addAndWait(
      {
        kind: 'incomingRequest',
        deviceHashId: device.hashId,
        environmentHashId: device.environmentHashId,
        webRequest: web,
        receivedAt: new Date().toISOString(),
      },
      this.ctx.config.gatewayWaitMs,
    );
    if (outcome.state === 'pending') {
      const payload = Buffer.from(JSON.stringify({ status: 'accepted', message: 'queued; no answer from the handler in time' }));
      return { statusCode: 202, headers: { 'content-type': 'application/json', 'content-length': payload.length }, payload };
    }
    const answer = outcome.result.answer;
    if (!answer) return json(503, 'unavailable_error', 'the request was queued but could not be processed yet');
    const { payload, contentType } = encodeAnswerBody(answer.body);
    const headers: Record<string, string | number> = { ...answer.headers, 'content-length': payload.length };
    if (contentType && !Object.keys(answer.headers).some((h) => h.toLowerCase() === 'content-type')) headers['content-type'] = contentType;
    return { statusCode: answer.statusCode, headers, payload };
  }
}

const headerString = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);
