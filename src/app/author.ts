// Who makes a change through the API, for the audit trail. The HTTP layer runs every changing operation
// (POST, PUT, PATCH, DELETE with an account) inside `asAuthor`; the Db (db.ts) runs each of its writes on a
// connection whose `gridgate.audit` names that author (and '' for a write outside an operation), and the table's
// audit trigger (migrations 045 and 061) logs the rows the write changes in the write's own transaction: a
// change that rolls back leaves no log row, and no route logs by hand. Writes outside an operation (devices,
// workers) are not logged, nor is housekeeping (`Db.maintenance`), and a row of another environment than the
// author's is never logged under the author (the trigger compares them: migration 062).

import { AsyncLocalStorage } from 'node:async_hooks';

export interface Author {
  environmentId: number;
  /** the account's hashId (the log's userHashId) */
  userHashId: string;
}

// The author of an operation while it runs: anything it started that outlives it (a timer, a batch flushed later with
// other callers' work) inherits this store but finds it closed, and writes as nobody.
interface Operation {
  readonly setting: string;
  open: boolean;
}
const current = new AsyncLocalStorage<Operation>();

/** Runs `fn` with `author` as the author of every write it makes until `fn` (or the promise it returns) settles. */
export function asAuthor<T>(author: Author, fn: () => T): T {
  const operation: Operation = { setting: JSON.stringify({ e: author.environmentId, u: author.userHashId }), open: true };
  const close = () => {
    operation.open = false;
  };
  let result: T;
  try {
    result = current.run(operation, fn);
  } catch (err) {
    close();
    throw err;
  }
  if (result instanceof Promise) result.then(close, close);
  else close();
  return result;
}

/** Runs `fn` with no author (a write the API causes but does not make, such as a background job it starts). */
export function withoutAuthor<T>(fn: () => T): T {
  return current.exit(fn);
}

/** The `gridgate.audit` value of the write being made now, or null outside an operation. */
export const authorSetting = (): string | null => {
  const operation = current.getStore();
  return operation?.open ? operation.setting : null;
};
