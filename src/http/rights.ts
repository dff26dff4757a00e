// The contract between a route and the API runtime (src/api/app.ts): what a route declares in its
// `config` (who may call it, with which rights) and what a request carries once authenticated.
import type { Account } from '../app/account.ts';
import { NotFoundError, ParameterError, RightError } from '../app/errors.ts';

/** Rights an operation needs per environment type; a type that is absent cannot use the operation. */
export interface RouteRights {
  connectivity?: string;
  monitoring?: string;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** `environment` (default): token + Environment-Hash-Id; `account`: token only; `none`: public. */
    auth?: 'environment' | 'account' | 'none';
    rights?: RouteRights;
    /** false for operational endpoints (health, metrics, OpenAPI, internal) that take no Api-Version. */
    apiVersion?: boolean;
    /** the query's `offset` is a value of the previous answer (suggestions' last item), not a sealed nextPageOffset */
    offsetIsValue?: boolean;
    /** the query's `apiVersion` and `environmentHashId` may stand for those headers (a browser's EventSource sends none) */
    headersFromQuery?: boolean;
  }
  interface FastifyRequest {
    account: Account;
    apiVersion: number;
  }
}

// the original SDK's changeEnvironment(hashId, type) sends `<type>:<hashId>` for every type but 'environment'
const PREFIXED_TYPES: Record<string, Account['environment']['type']> = { supplier: 'connectivity', environment: 'monitoring' };

/**
 * Checks Environment-Hash-Id and the operation's rights for the account. The header is a bare hashId
 * (either environment type) or `supplier:<hashId>` (a connectivity environment).
 */
export function authorize(account: Account, header: string | undefined, rights: RouteRights | undefined): void {
  if (header === undefined || header === '') {
    const own = account.environment.type === 'connectivity' ? `supplier:${account.environment.hashId}` : account.environment.hashId;
    throw new ParameterError(`the header Environment-Hash-Id is required: the environment the operation is for (this account's is ${own})`);
  }
  const [prefix, environmentHashId] = header?.includes(':') ? header.split(/:(.*)/s, 2) : [undefined, header];
  // another environment's hashId (or a prefix of the other type) is answered like one that does not exist: tenants learn nothing of each other
  const typeMatches = prefix === undefined || PREFIXED_TYPES[prefix] === account.environment.type;
  if (environmentHashId !== account.environment.hashId || !typeMatches) throw new NotFoundError('environment', header);
  if (!rights) return;
  const needed = rights[account.environment.type];
  if (needed === undefined) throw new RightError(`This operation is not available in a ${account.environment.type} environment`);
  if (needed !== '' && !account.rights.includes(needed)) throw new RightError(`This operation needs the right ${needed}`);
}
