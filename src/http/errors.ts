import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, RateLimitError, UnavailableError } from '../app/errors.ts';
import { isTransient } from '../app/transient.ts';

interface AjvError {
  instancePath?: string;
  message?: string;
  params?: Record<string, unknown>;
  keyword?: string;
}

/** Names the offending field of a schema validation error: `body.psk must NOT have more than 512 characters`. */
function describeValidation(err: FastifyError): string {
  const first = (err.validation as AjvError[] | undefined)?.[0];
  if (!first) return err.message;
  const context = (err as FastifyError & { validationContext?: string }).validationContext ?? 'body';
  let field = (first.instancePath ?? '').replace(/^\//, '').replace(/\//g, '.');
  if (first.keyword === 'required' && first.params?.missingProperty) {
    field = field ? `${field}.${first.params.missingProperty}` : String(first.params.missingProperty);
    return `${context === 'body' ? '' : `${context} `}${field} is required`.trim();
  }
  if (first.keyword === 'additionalProperties' && first.params?.additionalProperty) {
    return `${field ? `${field}.` : ''}${first.params.additionalProperty} is not allowed`;
  }
  const subject = field || context;
  let message = `${subject} ${first.message ?? 'is invalid'}`;
  if (first.keyword === 'enum' && Array.isArray(first.params?.allowedValues)) message += `: ${(first.params.allowedValues as unknown[]).join(', ')}`;
  return message;
}

/** The one place errors become `{ key, message }` bodies and statuses. */
export function errorHandler(err: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  if (err instanceof AppError) {
    if (err instanceof RateLimitError) reply.header('retry-after', String(err.retryAfterSeconds));
    reply.status(err.status).send({ key: err.key, message: err.message, ...(err.details === undefined ? {} : { details: err.details }) });
    return;
  }
  if (err.validation) {
    reply.status(400).send({ key: 'parameter_error', message: describeValidation(err) });
    return;
  }
  if (err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
    const sent = request.headers['content-type'];
    reply.status(400).send({
      key: 'parameter_error',
      message: `the body must be JSON: send the header Content-Type: application/json (${sent ? `not ${sent}` : 'none was sent'})`,
    });
    return;
  }
  if (err.statusCode === 413) {
    reply.status(413).send({ key: 'parameter_error', message: 'request body is too large' });
    return;
  }
  if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
    reply.status(400).send({ key: 'parameter_error', message: err.message });
    return;
  }
  // a store away (PostgreSQL stopped or restarting): the outage is logged once by the store's own outage log, and the
  // caller is told to come back rather than that the service is broken
  if (isTransient(err)) {
    const unavailable = new UnavailableError('A store of the service is unavailable (PostgreSQL or Redis is restarting or unreachable); try again shortly');
    reply.header('retry-after', '5').status(unavailable.status).send({ key: unavailable.key, message: unavailable.message });
    return;
  }
  request.log.error({ err }, 'unhandled error');
  reply.status(500).send({ key: 'server_error', message: 'An internal error occurred; it has been logged.' });
}
