/** The ExportRequest model's columns of `export_request x`, with what its download link is made of. */
export const EXPORT_REQUEST_SELECT =
  'x.hash_id AS x_hash_id, x.content AS x_content, x.delimiter AS x_delimiter, x.row_delimiter AS x_row_delimiter, ' +
  'x.status AS x_status, x.progress AS x_progress, x.created_at AS x_created_at, x.expires_at AS x_expires_at, x.error AS x_error';

export interface ExportRequest {
  hashId: string;
  content: Record<string, unknown>;
  delimiter: ',' | ';';
  rowDelimiter: '\n' | '\r\n';
  status: 'waiting' | 'creating' | 'available' | 'deleted';
  /** only at status available */
  downloadUrl?: string;
  /** rows written of the rows to write, 0 to 1 (beyond the SDK's model, which its clients let pass) */
  progress: number;
  createdAt: string;
  /** why an export that could not be written (status deleted, never available) was not (beyond the SDK's model too) */
  error?: string;
}

/** The model of a row; `link` makes the download URL of an available export from its hashId and expiry. */
export function toExportRequest(r: Record<string, unknown>, link: (hashId: string, expiresAt: Date) => string): ExportRequest {
  const status = r.x_status as ExportRequest['status'];
  return {
    hashId: r.x_hash_id as string,
    content: r.x_content as Record<string, unknown>,
    delimiter: r.x_delimiter as ExportRequest['delimiter'],
    rowDelimiter: r.x_row_delimiter as ExportRequest['rowDelimiter'],
    status,
    ...(status === 'available' ? { downloadUrl: link(r.x_hash_id as string, r.x_expires_at as Date) } : {}),
    progress: r.x_progress as number,
    createdAt: (r.x_created_at as Date).toISOString(),
    ...(typeof r.x_error === 'string' ? { error: r.x_error } : {}),
  };
}
