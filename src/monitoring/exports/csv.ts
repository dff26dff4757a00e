// Every CSV the service writes (exports, the import template) encodes its cells with csvCell, and the import reads
// them back through csvText: one rule in one place.
//
// Formula injection (OWASP "CSV Injection"): a spreadsheet that opens the file runs a cell starting with `=`, `+`,
// `-`, `@`, tab or carriage return as a formula, and names in an export are other people's text (a pin group named
// `=HYPERLINK(...)`, a supplier's quantity renamed on a customer's claimed device). Such a cell is written with a
// single quote before it, and quoted: the spreadsheet shows it as the text it is. The rule applies to text only:
// a cell that is a plain decimal number (`-3.5`, `+2`, `1e-3`) is no formula and stays a number a spreadsheet can
// compute with. The quote is added again before text that already starts with quotes and then one of those
// characters (`'=x` is written `''=x`), so csvText, which takes one quote off exactly such cells, gives back every
// value as it was.

/** The delimiters of an export, as the SDK names them. */
export interface CsvFormat {
  delimiter: ',' | ';';
  rowDelimiter: '\n' | '\r\n';
}

/** A plain decimal number: what a spreadsheet reads as a number and never as a formula. */
const PLAIN_NUMBER = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;
/** Text a spreadsheet would run as a formula, with any quotes an earlier neutralising put before it. */
const FORMULA_START = /^'*[=+\-@\t\r]/;
/** A cell csvCell neutralised: one quote, then what FORMULA_START matches. */
const NEUTRALISED = /^''*[=+\-@\t\r]/;

/** A value as text: null and undefined as an empty cell, times in ISO 8601, objects as JSON. */
function textOf(v: unknown): string {
  if (v === null || v === undefined) return '';
  if (typeof v === 'string') return v;
  if (v instanceof Date) return v.toISOString();
  return typeof v === 'object' ? JSON.stringify(v) : String(v);
}

/**
 * One cell of a CSV line: text that would start a formula gets a single quote before it (plain numbers excepted,
 * see the top of this file), then RFC 4180 quoting: a neutralised cell, and one holding a quote, a line break or
 * either delimiter the SDK allows (`,` `;`: a spreadsheet that guesses the other one still sees whole cells), is
 * quoted with its quotes doubled.
 */
export function csvCell(value: unknown): string {
  let s = textOf(value);
  const neutralise = FORMULA_START.test(s) && !PLAIN_NUMBER.test(s);
  if (neutralise) s = `'${s}`;
  return neutralise || /[",;\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

/** A cell's value as csvCell had it: the quote it put before a would-be formula taken off again. */
export function csvText(field: string): string {
  return NEUTRALISED.test(field) ? field.slice(1) : field;
}

/** One CSV line of `values`, each encoded by csvCell. */
export function csvLine(values: readonly unknown[], format: CsvFormat): string {
  return values.map(csvCell).join(format.delimiter) + format.rowDelimiter;
}
