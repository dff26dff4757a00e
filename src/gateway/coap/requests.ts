/**
 * A device's CoAP request to a queued job and its answer, as node-coap would have it read: a request in, a response
 * out. The request becomes a WebRequest, is queued durably like an HTTPS one, and is answered with what the device
 * type's handler returned, its status mapped to a CoAP code (RFC 8075) and its body type to a Content-Format.
 * Firmware downloads are answered here from the image store, without the queue. Who the device is was settled before
 * (sessions.ts for coaps, the listener for plain coap).
 */
import type { AppContext } from '../../app/context.ts';
import { ContentFormat, encodeUint, optionText, stringOptions, uintOption } from '../../coap/index.ts';
import type { CoapOption, CoapRequest, CoapResponse } from '../../coap/index.ts';
import { countDeviceEvent } from '../../connectivity/counters/recorder.ts';
import { metrics } from '../../app/metrics.ts';
import type { DeviceAnswer } from '../../connectivity/device-jobs.ts';
import type { DeviceQueue } from '../../pipeline/queue.ts';
import { countRefusedContact, REFUSED_MESSAGE, type AdmittedDevice } from '../admission.ts';
import { coapFirmwareHashId, firmwareOfferOptions, serveFirmwareOverCoap } from '../firmware.ts';
import { encodeAnswerBody, parseQuery, typedBody, webRequest } from '../../sandbox/web-request.ts';

const STATUS_TO_CODE: Record<number, string> = {
  200: '2.05',
  201: '2.01',
  202: '2.04',
  204: '2.04',
  400: '4.00',
  401: '4.01',
  402: '4.02',
  403: '4.03',
  404: '4.04',
  405: '4.05',
  406: '4.06',
  408: '4.08',
  409: '4.09',
  412: '4.12',
  413: '4.13',
  415: '4.15',
  422: '4.22',
  429: '4.29',
  500: '5.00',
  501: '5.01',
  502: '5.02',
  503: '5.03',
  504: '5.04',
};

/** An HTTP status as a CoAP response code (RFC 8075 §7); statuses without an equivalent fall back to their class. */
export function coapCode(status: number): string {
  return STATUS_TO_CODE[status] ?? (status >= 200 && status < 300 ? '2.05' : status >= 400 && status < 500 ? '4.00' : '5.00');
}

const BODY_FORMAT: Record<string, number> = { json: ContentFormat.json, string: ContentFormat.text, hex: ContentFormat.octetStream };
const FORMAT_MEDIA_TYPE: Record<number, string> = { [ContentFormat.json]: 'application/json', [ContentFormat.text]: 'text/plain' };
/** Options that only frame the exchange; the handler sees the whole request instead. */
const TRANSPORT_OPTIONS = new Set(['Uri-Path', 'Uri-Query', 'Block1', 'Block2', 'Size1', 'Size2']);

/** A response with a JSON body (the service's `{ key, message }` errors and the 2.04 "accepted"). */
export function json(code: string, body: unknown): CoapResponse {
  return { code, options: [{ name: 'Content-Format', value: encodeUint(ContentFormat.json) }], payload: Buffer.from(JSON.stringify(body)) };
}

/** Errors of the exchange layer (4.13 and friends) in the service's `{ key, message }` shape. */
export function diagnostic(code: string, message: string): { payload: Buffer; options: CoapOption[] } {
  const key = code.startsWith('4.') ? 'parameter_error' : 'unavailable_error';
  return { payload: Buffer.from(JSON.stringify({ key, message })), options: [{ name: 'Content-Format', value: encodeUint(ContentFormat.json) }] };
}

/** Uri-Query options as key/value pairs (`k=v`; a bare `k` has the value ''). */
export function queryPairs(options: CoapOption[]): [string, string][] {
  return stringOptions(options, 'Uri-Query').map((q) => {
    const i = q.indexOf('=');
    return i < 0 ? [q, ''] : [q.slice(0, i), q.slice(i + 1)];
  });
}

/** The requests of admitted devices, from both listeners: counted while in flight, refused once shutting down. */
export interface DeviceRequests {
  /** A request of `device` (Uri-Query as `query`, without what only the listener reads) answered. */
  serve(device: AdmittedDevice, req: CoapRequest, protocol: 'coaps' | 'coap', ip: string, query: [string, string][]): Promise<CoapResponse>;
  /** Requests between their arrival and their answer. */
  readonly inFlight: number;
  /** Set by `stop()`: new requests are answered 5.03 (the listeners leave most unanswered before that). */
  readonly closing: boolean;
  stop(): void;
}

export function deviceRequests(ctx: AppContext, queue: DeviceQueue): DeviceRequests {
  let closing = false;
  let inFlight = 0;
  return {
    async serve(device, req, protocol, ip, query) {
      if (closing) return json('5.03', { key: 'unavailable_error', message: 'the gateway is shutting down; try again' });
      if (device.refused) {
        countRefusedContact(ctx, protocol, device.deviceHashId);
        return json('4.03', { key: 'right_error', message: REFUSED_MESSAGE });
      }
      inFlight++;
      try {
        return await handleRequest(ctx, queue, device, req, protocol, ip, query);
      } catch (err) {
        ctx.log.error({ err: (err as Error).message }, 'device request failed');
        return json('5.03', { key: 'unavailable_error', message: 'the request could not be queued; try again' });
      } finally {
        inFlight--;
      }
    },
    get inFlight() {
      return inFlight;
    },
    get closing() {
      return closing;
    },
    stop() {
      closing = true;
    },
  };
}

function answerResponse(answer: DeviceAnswer): CoapResponse {
  const { payload } = encodeAnswerBody(answer.body);
  const options: CoapOption[] = answer.body ? [{ name: 'Content-Format', value: encodeUint(BODY_FORMAT[answer.body.type] ?? ContentFormat.json) }] : [];
  options.push(...firmwareOfferOptions(answer.headers));
  return { code: coapCode(answer.statusCode), options, payload };
}

async function handleRequest(
  ctx: AppContext,
  queue: DeviceQueue,
  device: AdmittedDevice,
  req: CoapRequest,
  protocol: 'coaps' | 'coap',
  ip: string,
  query: [string, string][],
): Promise<CoapResponse> {
  // firmware downloads are served here, from the image store: no queue, no handler
  const firmwareHashId = coapFirmwareHashId(req);
  if (firmwareHashId) {
    // a contact the gateway answers itself, as over HTTPS (Block2 blocks served from the endpoint's copy are part of it)
    countDeviceEvent(ctx, device.deviceHashId, 'contacts');
    return serveFirmwareOverCoap(ctx, { hashId: device.deviceHashId }, firmwareHashId, req);
  }
  const headers: Record<string, string | string[]> = {};
  for (const o of req.options) {
    if (TRANSPORT_OPTIONS.has(o.name)) continue;
    const name = o.name.toLowerCase();
    const prev = headers[name];
    const value = optionText(o);
    headers[name] = prev === undefined ? value : Array.isArray(prev) ? [...prev, value] : [prev, value];
  }
  const format = uintOption(req.options, 'Content-Format');
  const request = webRequest({
    url: {
      protocol,
      host: stringOptions(req.options, 'Uri-Host')[0] ?? '',
      path: `/${stringOptions(req.options, 'Uri-Path').join('/')}`,
      query: parseQuery(query),
    },
    method: req.method,
    headers,
    body: typedBody(req.payload, format === undefined ? undefined : FORMAT_MEDIA_TYPE[format]),
    ip,
    ...(device.pskIdentity !== undefined ? { pskIdentity: device.pskIdentity } : {}),
    certificate: device.certificate ?? null,
  });
  metrics.deviceRequests.inc({ protocol });
  const outcome = await queue.addAndWait(
    {
      kind: 'incomingRequest',
      deviceHashId: device.deviceHashId,
      environmentHashId: device.environmentHashId,
      webRequest: request,
      receivedAt: new Date().toISOString(),
    },
    ctx.config.gatewayWaitMs,
  );
  // HTTPS says 202; CoAP has no "accepted": 2.04 with the same body as the 202
  if (outcome.state === 'pending') return json('2.04', { status: 'accepted', message: 'queued; no answer from the handler in time' });
  if (!outcome.result.answer) return json('5.03', { key: 'unavailable_error', message: 'the request was queued but could not be processed yet' });
  return answerResponse(outcome.result.answer);
}
