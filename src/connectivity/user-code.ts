import { AppError, ParameterError } from '../app/errors.ts';
import { compileUserCode, CompileRateLimited } from '../sandbox/compile.ts';
import type { SupplierCodeLimits } from '../sandbox/limits.ts';

/**
 * Compiles supplier code when it is saved, so a syntax error is a 400 naming the field and the
 * position in the supplier's source, not a failure first seen on a device's report. `owner` is
 * the supplier's environment: the compile limits (size, new sources per minute: 429) are its own, bounded by `limits`
 * (the context's `config.supplierCode`).
 * Returns the hash the compiled code is cached under.
 */
export async function compileOnSave(limits: SupplierCodeLimits, field: string, source: string, owner: string | number): Promise<string> {
  let result;
  try {
    result = await compileUserCode(source, { owner: String(owner), save: true, limits });
  } catch (error) {
    if (error instanceof CompileRateLimited) throw new AppError('rate_limit_error', 429, `${field}: ${error.message}`, { field });
    throw error;
  }
  if (!result.ok) {
    throw new ParameterError(`${field}: line ${result.line}, column ${result.column}: ${result.message}`, { field, line: result.line, column: result.column });
  }
  return result.hash;
}
