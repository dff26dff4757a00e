// A find's nextPageOffset leaves the service sealed: AES-256-GCM under a key derived from
// SECRET_KEY, bound to the operation and its sortBy. The client cannot read the keyset position
// inside (it holds internal row ids) nor forge or alter one, and an offset of one operation or sort
// order is refused by another. src/app/find.ts sees only positions this service made.

import type { FastifyRequest } from 'fastify';
import { ParameterError } from '../app/errors.ts';
import { decryptSecret, encryptSecret } from '../app/keys.ts';

/** What an offset is bound to: the operation and the sort order it was made for. */
function scope(request: FastifyRequest): string {
  const sortBy = (request.query as { sortBy?: unknown } | undefined)?.sortBy;
  return `${request.method} ${request.routeOptions.url ?? ''}\n${typeof sortBy === 'string' ? sortBy : ''}`;
}

export function sealOffset(key: Buffer, request: FastifyRequest, position: string): string {
  return encryptSecret(key, Buffer.from(position), scope(request)).toString('base64url');
}

/** The position inside an offset this service sealed for this operation and sortBy; a parameter_error otherwise. */
export function openOffset(key: Buffer, request: FastifyRequest, offset: string): string {
  const sealed = Buffer.from(offset, 'base64url');
  if (sealed.length > 28) {
    try {
      return decryptSecret(key, sealed, scope(request)).toString('utf8');
    } catch {
      // tampered, made for another operation or sortBy, or under another SECRET_KEY
    }
  }
  throw new ParameterError('offset is not a nextPageOffset this service returned for this operation and sortBy');
}
