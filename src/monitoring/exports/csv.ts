/** The delimiters of an export, as the SDK names them. */
export interface CsvFormat { delimiter: ',' | ';'; rowDelimiter: '\n' | '\r\n' }

/** One CSV line (RFC 4180 quoting: a value holding the delimiter, a quote or a line break is quoted, its quotes doubled). */
export function csvLine(values: readonly unknown[], format: CsvFormat): string {
  let line = '';
  for (let i = 0; i < values.length; i++) {
    if (i > 0) line += format.delimiter;
    const v = values[i];
    if (v === null || v === undefined) continue;
    const s = typeof v === 'string' ? v : v instanceof Date ? v.toISOString() : typeof v === 'object' ? JSON.stringify(v) : String(v);
    line += s.includes(format.delimiter) || s.includes('"') || s.includes('\n') || s.includes('\r') ? `"${s.replaceAll('"', '""')}"` : s;
  }
  return line + format.rowDelimiter;
}
