// A reader of text/event-stream answers (the console's live log and issue streams) for tests and the bench: blocks
// parsed as they arrive, as an EventSource would see them.

export interface SseBlock {
  event?: string;
  id?: string;
  data?: string;
  retry?: string;
  comment?: string;
}

/** Reads `body` to its end (or until aborted), calling `onBlock` with each block of fields. */
export async function readEventStream(body: ReadableStream<BufferSource>, onBlock: (block: SseBlock) => void): Promise<void> {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block: SseBlock = {};
      for (const line of buffer.slice(0, end).split('\n')) {
        if (line.startsWith(':')) block.comment = line.slice(1).trim();
        else {
          const at = line.indexOf(':');
          (block as Record<string, string>)[line.slice(0, at)] = line.slice(at + 1).trimStart();
        }
      }
      buffer = buffer.slice(end + 2);
      onBlock(block);
    }
  }
}

export interface OpenEventStream {
  status: number;
  contentType: string | null;
  /** every block so far, in order */
  blocks: SseBlock[];
  /** settles when the stream ends or is closed */
  closed: Promise<void>;
  /** the events named `name` so far, their data parsed */
  events<T = Record<string, unknown>>(name: string): { id: string; data: T }[];
  close(): void;
}

/** GETs `url` and keeps reading it as it arrives; a refused answer is read whole and has no blocks. */
export async function openEventStream(url: string, headers: Record<string, string>): Promise<OpenEventStream> {
  const abort = new AbortController();
  const res = await fetch(url, { headers, signal: abort.signal });
  const blocks: SseBlock[] = [];
  let closed: Promise<void> = Promise.resolve();
  if (res.status === 200 && res.body) {
    closed = readEventStream(res.body, (b) => blocks.push(b)).catch(() => undefined);
  } else {
    await res.text();
  }
  return {
    status: res.status,
    contentType: res.headers.get('content-type'),
    blocks,
    closed,
    events: <T>(name: string) => blocks.filter((b) => b.event === name).map((b) => ({ id: b.id!, data: JSON.parse(b.data!) as T })),
    close: () => abort.abort(),
  };
}
