/** The one error hierarchy; `src/http/errors.ts` maps it once to `{ key, message }` and a status. */
export class AppError extends Error {
  readonly key: string;
  readonly status: number;
  readonly details?: unknown;
  constructor(key: string, status: number, message: string, details?: unknown) {
    super(message);
    this.key = key;
    this.status = status;
    this.details = details;
  }
}

export class ParameterError extends AppError {
  constructor(message: string, details?: unknown) {
    super('parameter_error', 400, message, details);
  }
}
export class AuthenticationError extends AppError {
  constructor(message = 'Authentication required: send Authorization: Bearer <token>') {
    super('authentication_error', 401, message);
  }
}
export class RightError extends AppError {
  constructor(message: string) {
    super('right_error', 403, message);
  }
}
export class NotFoundError extends AppError {
  constructor(what: string, hashId?: string) {
    super('not_found_error', 404, hashId === undefined ? `${what} not found` : `${what} ${hashId} not found`);
  }
}
export class ConflictError extends AppError {
  constructor(message: string) {
    super('conflict_error', 409, message);
  }
}
export class ApiVersionError extends AppError {
  constructor(message: string) {
    super('api_version_error', 400, message);
  }
}
export class OutdatedClientError extends AppError {
  constructor(message: string) {
    super('outdated_client_error', 403, message);
  }
}
export class RateLimitError extends AppError {
  /** seconds until the limit lifts, sent as Retry-After */
  readonly retryAfterSeconds: number;
  constructor(message: string, retryAfterSeconds: number) {
    super('rate_limit_error', 429, message);
    this.retryAfterSeconds = retryAfterSeconds;
  }
}
export class UnavailableError extends AppError {
  constructor(message: string) {
    super('unavailable_error', 503, message);
  }
}
