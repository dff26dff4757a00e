// Small parts every page uses: loading and error states, a data hook, form fields, tables. Every text a tenant
// wrote is rendered as text (JSX escapes it); nothing here sets HTML.
import type { ComponentChildren, InputHTMLAttributes } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api.ts';
import { messages } from './i18n.ts';

const t = messages(
  { loading: 'Loading…', retry: 'Try again', refused: 'The service refused: {message}', failed: 'Something went wrong: {message}', empty: 'Nothing here yet.' },
  { loading: 'Laden…', retry: 'Opnieuw', refused: 'De service weigerde: {message}', failed: 'Er ging iets mis: {message}', empty: 'Hier is nog niets.' },
);

/** A request's state: data once answered, the error when refused, and a way to ask again. */
export function useAsync<T>(
  load: (signal: AbortSignal) => Promise<T>,
  deps: unknown[],
): { data: T | undefined; error: unknown; loading: boolean; reload: () => void } {
  const [state, setState] = useState<{ data: T | undefined; error: unknown; loading: boolean }>({ data: undefined, error: undefined, loading: true });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    const controller = new AbortController();
    setState((s) => ({ ...s, loading: true, error: undefined }));
    load(controller.signal).then(
      (data) => {
        if (!controller.signal.aborted) setState({ data, error: undefined, loading: false });
      },
      (error: unknown) => {
        if (!controller.signal.aborted) setState({ data: undefined, error, loading: false });
      },
    );
    return () => controller.abort();
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((n) => n + 1), []);
  return { ...state, reload };
}

/**
 * Calls `again` `ms` after each answer while `active`, not on a fixed beat: the next read waits for the last one, so an
 * answer slower than `ms` is still shown (useAsync aborts a request whose deps change) and reads never pile up on a
 * slow service. `again` must keep its identity (a state setter's updater wrapped in useCallback).
 */
export function useAskAgain(ms: number, busy: boolean, again: () => void, active = true): void {
  useEffect(() => {
    if (!active || busy) return;
    const timer = setTimeout(again, ms);
    return () => clearTimeout(timer);
  }, [ms, busy, active, again]);
}

export function ErrorBox({ error, onRetry }: { error: unknown; onRetry?: () => void }) {
  if (!error) return null;
  const message =
    error instanceof ApiError ? t('refused', { message: error.message }) : t('failed', { message: error instanceof Error ? error.message : String(error) });
  return (
    <div class="error" role="alert">
      <span>{message}</span>
      {onRetry && (
        <button type="button" onClick={onRetry}>
          {t('retry')}
        </button>
      )}
    </div>
  );
}

export const Loading = () => (
  <p class="muted" role="status">
    {t('loading')}
  </p>
);
export const Empty = ({ children }: { children?: ComponentChildren }) => <p class="muted">{children ?? t('empty')}</p>;

let fieldCounter = 0;
/** A labelled input; `label` is the visible name that screen readers read. */
export function Field({ label, hint, children }: { label: string; hint?: string; children: (id: string) => ComponentChildren }) {
  const id = useRef(`f${++fieldCounter}`).current;
  return (
    <div class="field">
      <label for={id}>{label}</label>
      {children(id)}
      {hint && <small class="muted">{hint}</small>}
    </div>
  );
}

type InputType = 'text' | 'email' | 'password' | 'number' | 'search' | 'url' | 'tel' | 'datetime-local';

export function TextInput(props: {
  label: string;
  value: string;
  onInput: (v: string) => void;
  type?: InputType;
  hint?: string;
  required?: boolean;
  autoComplete?: string;
  inputMode?: 'numeric' | 'text' | 'decimal';
  pattern?: string;
  name?: string;
  autoFocus?: boolean;
}) {
  const { label, value, onInput, hint, type, autoFocus, ...rest } = props;
  const input = useRef<HTMLInputElement>(null);
  // focused once it is shown (the autofocus attribute is honoured for the first page's element only)
  useEffect(() => {
    if (autoFocus) input.current?.focus();
  }, [autoFocus]);
  return (
    <Field label={label} hint={hint}>
      {(id) => (
        <input
          ref={input}
          {...({ id, type: type ?? 'text', ...rest } as unknown as InputHTMLAttributes<HTMLInputElement>)}
          value={value}
          onInput={(e) => onInput((e.target as HTMLInputElement).value)}
        />
      )}
    </Field>
  );
}

export function Table<R>({
  rows,
  columns,
  caption,
  rowKey,
  onRow,
}: {
  rows: R[];
  caption: string;
  rowKey: (r: R) => string;
  onRow?: (r: R) => void;
  columns: { title: string; cell: (r: R) => ComponentChildren }[];
}) {
  if (rows.length === 0) return <Empty />;
  return (
    <table>
      <caption class="sr-only">{caption}</caption>
      <thead>
        <tr>
          {columns.map((c) => (
            <th scope="col" key={c.title}>
              {c.title}
            </th>
          ))}
        </tr>
      </thead>
      <tbody>
        {rows.map((r) => (
          <tr key={rowKey(r)} class={onRow ? 'clickable' : undefined} onClick={onRow ? () => onRow(r) : undefined}>
            {columns.map((c) => (
              <td key={c.title}>{c.cell(r)}</td>
            ))}
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function PageTitle({ children, actions }: { children: ComponentChildren; actions?: ComponentChildren }) {
  useEffect(() => {
    const h = document.querySelector('main h1');
    document.title = `${h?.textContent ?? ''} · gridgate`;
  });
  return (
    <div class="page-title">
      <h1>{children}</h1>
      {actions && <div class="actions">{actions}</div>}
    </div>
  );
}
