import { ParameterError } from '../app/errors.ts';
import { compileUserCode } from '../sandbox/compile.ts';

/**
 * Compiles supplier code when it is saved, so a syntax error is a 400 naming the field and the
 * position in the supplier's source, not a failure first seen on a device's report.
 * Returns the hash the compiled code is cached under.
 */
export function compileOnSave(field: string, source: string): string {
  const result = compileUserCode(source);
  if (!result.ok) {
    throw new ParameterError(`${field}: line ${result.line}, column ${result.column}: ${result.message}`,
      { field, line: result.line, column: result.column });
  }
  return result.hash;
}
