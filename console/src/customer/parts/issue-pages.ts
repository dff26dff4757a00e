// The issue list a page at a time: issue find with the service's `closed` filter (false: the open ones only), newest
// first, ISSUE_PAGE rows per request; more on demand. After a change (an issue event) the pages shown are read again,
// so the list holds what the service answers now, however many pages were open.
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../../api.ts';
import type { IssueRow } from './parts.tsx';

export const ISSUE_PAGE = 50;

interface Page {
  rows: IssueRow[];
  nextPageOffset: string | null;
}

export interface IssuePages {
  rows: IssueRow[] | undefined;
  /** the service holds more rows past these */
  more: boolean;
  loading: boolean;
  error: unknown;
  loadMore: () => void;
  reload: () => void;
}

/** Issues, newest first: `closed` false the open ones, null open and closed; read again when `version` changes. */
export function useIssuePages(closed: boolean | null, version: number): IssuePages {
  const [state, setState] = useState<{ rows: IssueRow[] | undefined; next: string | null; loading: boolean; error: unknown }>({
    rows: undefined,
    next: null,
    loading: true,
    error: undefined,
  });
  const [tick, setTick] = useState(0);
  // pages shown: kept across a change, back to one for another filter
  const pages = useRef({ closed, count: 1 });
  if (pages.current.closed !== closed) pages.current = { closed, count: 1 };
  const running = useRef<AbortController | null>(null);

  const read = (offset: string | undefined, signal: AbortSignal) =>
    api<Page>('GET', '/issue/', {
      query: { sortBy: 'createdAt', descending: true, rowsPerPage: ISSUE_PAGE, closed: closed ?? undefined, offset },
      signal,
    });

  useEffect(() => {
    running.current?.abort();
    const controller = new AbortController();
    running.current = controller;
    setState((s) => ({ ...s, loading: true, error: undefined }));
    (async () => {
      const rows: IssueRow[] = [];
      let offset: string | null = null;
      let n = 0;
      do {
        const page: Page = await read(offset ?? undefined, controller.signal);
        rows.push(...page.rows);
        offset = page.nextPageOffset;
        n++;
      } while (offset !== null && n < pages.current.count);
      return { rows, next: offset };
    })().then(
      ({ rows, next }) => {
        if (!controller.signal.aborted) setState({ rows, next, loading: false, error: undefined });
      },
      (error: unknown) => {
        if (!controller.signal.aborted) setState((s) => ({ ...s, loading: false, error }));
      },
    );
    return () => controller.abort();
  }, [closed, version, tick]);

  const loadMore = useCallback(() => {
    const next = state.next;
    if (next === null || state.loading) return;
    const controller = new AbortController();
    running.current = controller;
    setState((s) => ({ ...s, loading: true, error: undefined }));
    read(next, controller.signal).then(
      (page) => {
        if (controller.signal.aborted) return;
        pages.current.count++;
        // a row the list holds already (the list was read again meanwhile) is not shown twice
        setState((s) => {
          const seen = new Set((s.rows ?? []).map((r) => r.issue.hashId));
          return {
            rows: [...(s.rows ?? []), ...page.rows.filter((r) => !seen.has(r.issue.hashId))],
            next: page.nextPageOffset,
            loading: false,
            error: undefined,
          };
        });
      },
      (error: unknown) => {
        if (!controller.signal.aborted) setState((s) => ({ ...s, loading: false, error }));
      },
    );
  }, [state.next, state.loading, closed]);

  const reload = useCallback(() => setTick((n) => n + 1), []);
  return { rows: state.rows, more: state.next !== null, loading: state.loading, error: state.error, loadMore, reload };
}
