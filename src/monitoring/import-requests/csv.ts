import { csvCell, csvText } from '../exports/csv.ts';

/** One CSV record: its fields and the line it starts on (1-based). */
export interface CsvRecord {
  line: number;
  fields: string[];
}

/**
 * RFC 4180 CSV: `,` or `;` (the delimiter of the header line) between fields, `"` quotes with `""`
 * inside, CRLF or LF between records. A quote left open is an error naming its line. A field the
 * service's own CSVs neutralised as a would-be formula (src/monitoring/exports/csv.ts) is read as the
 * value it was, its added quote taken off: a template read back has the names it was written with.
 */
export function parseCsv(text: string): CsvRecord[] {
  const body = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  const firstLine = body.slice(0, body.search(/\r?\n|$/));
  const delimiter = (firstLine.match(/;/g)?.length ?? 0) > (firstLine.match(/,/g)?.length ?? 0) ? ';' : ',';
  const records: CsvRecord[] = [];
  let fields: string[] = [];
  let field = '';
  let line = 1;
  let start = 1;
  let quoted = false;
  let i = 0;
  const endRecord = () => {
    fields.push(csvText(field));
    if (!(fields.length === 1 && fields[0] === '')) records.push({ line: start, fields });
    fields = [];
    field = '';
  };
  while (i < body.length) {
    const c = body[i];
    if (quoted) {
      if (c === '"' && body[i + 1] === '"') {
        field += '"';
        i += 2;
        continue;
      }
      if (c === '"') {
        quoted = false;
        i += 1;
        continue;
      }
      if (c === '\n') line += 1;
      field += c;
      i += 1;
      continue;
    }
    if (c === '"' && field === '') {
      quoted = true;
      i += 1;
      continue;
    }
    if (c === delimiter) {
      fields.push(csvText(field));
      field = '';
      i += 1;
      continue;
    }
    if (c === '\r' && body[i + 1] === '\n') {
      i += 1;
      continue;
    }
    if (c === '\n') {
      endRecord();
      line += 1;
      start = line;
      i += 1;
      continue;
    }
    field += c;
    i += 1;
  }
  if (quoted) throw new Error(`line ${start}: a quoted field is not closed`);
  endRecord();
  return records;
}

/** A field of the import template, encoded as every CSV the service writes. */
export const csvField = (value: string): string => csvCell(value);
