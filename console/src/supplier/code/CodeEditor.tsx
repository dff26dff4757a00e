// The code editor of the supplier's workbench: Monaco with TypeScript's language service checking the code against
// the service's own typings of that kind of code (GET /device-type/typings.d.ts and its three siblings), so a
// supplier sees errors and completions while typing. Monaco is loaded (import()) when the first editor opens; the
// problems it finds, and a dry run's failure placed at its line and column, are listed below the editor as well,
// as buttons that put the cursor there (for people who do not see the squiggles, and for tests: data-markers).
import { useEffect, useRef, useState } from 'preact/hooks';
import { messages } from '../../i18n.ts';
import { scheme } from '../../shell/theme.ts';
import { ErrorBox, Loading } from '../../ui.tsx';
import './code.css';

export type CodeKind = 'eventHandler' | 'parser' | 'webhookIdentifier' | 'certificateIdentifier';

/** Where the service serves the declarations each kind of code is written against (src/connectivity/typings/routes.ts). */
export const TYPINGS_PATH: Record<CodeKind, string> = {
  eventHandler: '/device-type/typings.d.ts',
  parser: '/supplier-report-type/typings.d.ts',
  webhookIdentifier: '/supplier-webhook/typings.d.ts',
  certificateIdentifier: '/supplier-certificate/typings.d.ts',
};

/** A place in the code a run failed at (the dry run's `error`), lines and columns from 1. */
export interface CodeMarker {
  line: number;
  column: number | null;
  message: string;
}

interface Problem {
  line: number;
  column: number;
  message: string;
  severity: 'error' | 'warning';
  fromRun: boolean;
}

const t = messages(
  {
    loading: 'Loading the editor…',
    problems: 'Problems',
    none: 'No problems found.',
    at: 'Line {line}, column {column}',
    error: 'error',
    warning: 'warning',
    run: 'run failed',
    tabHint: "In the editor Tab inserts a tab: press Ctrl+M (Cmd+Ctrl+M on a Mac) first to move on with Tab. Alt+F1 lists the editor's accessibility help.",
    noTypings: 'The typings could not be loaded ({message}): the editor checks syntax only.',
    fallback: 'The editor could not be loaded; edit the code as plain text.',
  },
  {
    loading: 'De editor laden…',
    problems: 'Problemen',
    none: 'Geen problemen gevonden.',
    at: 'Regel {line}, kolom {column}',
    error: 'fout',
    warning: 'waarschuwing',
    run: 'run mislukt',
    tabHint:
      'In de editor voegt Tab een tab in: druk eerst Ctrl+M (Cmd+Ctrl+M op een Mac) om met Tab verder te gaan. Alt+F1 toont de toegankelijkheidshulp van de editor.',
    noTypings: 'De typings konden niet geladen worden ({message}): de editor controleert alleen de syntaxis.',
    fallback: 'De editor kon niet geladen worden; bewerk de code als platte tekst.',
  },
);

type MonacoModule = typeof import('./monaco.ts');
let loading: Promise<MonacoModule> | null = null;
const loadMonaco = (): Promise<MonacoModule> =>
  (loading ??= import('./monaco.ts').catch((err: unknown) => {
    loading = null;
    throw err;
  }));

const typings = new Map<CodeKind, Promise<string>>();
let activeLib: { kind: CodeKind; dispose(): void } | null = null;

/** The declarations of `kind` as the only extra lib: each kind declares its own Arguments, Exec and Result. */
async function applyTypings(m: MonacoModule, kind: CodeKind): Promise<void> {
  if (!typings.has(kind)) {
    typings.set(
      kind,
      fetch(TYPINGS_PATH[kind], { credentials: 'same-origin' }).then((r) => {
        if (!r.ok) throw new Error(`HTTP ${r.status}`);
        return r.text();
      }),
    );
  }
  let text: string;
  try {
    text = await typings.get(kind)!;
  } catch (err) {
    typings.delete(kind);
    throw err;
  }
  if (activeLib?.kind === kind) return;
  activeLib?.dispose();
  const lib = m.typescriptDefaults.addExtraLib(text, `file:///gridgate/${kind}.d.ts`);
  activeLib = { kind, dispose: () => lib.dispose() };
}

let modelCounter = 0;

export interface CodeEditorProps {
  kind: CodeKind;
  value: string;
  onChange: (value: string) => void;
  /** the editor's accessible name */
  label: string;
  /** a dry run's failure, marked in the code */
  markers?: CodeMarker[];
  /** CSS height of the editor (it can be resized by its corner) */
  height?: string;
}

export function CodeEditor({ kind, value, onChange, label, markers = [], height = '26rem' }: CodeEditorProps) {
  const host = useRef<HTMLDivElement>(null);
  const onChangeRef = useRef(onChange);
  onChangeRef.current = onChange;
  const [monaco, setMonaco] = useState<MonacoModule | null>(null);
  const [failed, setFailed] = useState<unknown>(null);
  const [typingsError, setTypingsError] = useState<string | null>(null);
  const [problems, setProblems] = useState<Problem[]>([]);
  const editorRef = useRef<import('monaco-editor/editor/editor.api.js').editor.IStandaloneCodeEditor | null>(null);
  const dark = scheme.value === 'dark';
  /** texts the editor reported (onChange): a value prop equal to one of them is the editor's own, not a reset */
  const emitted = useRef(new Set<string>());

  // load Monaco and the typings, then make the editor on its model
  useEffect(() => {
    let live = true;
    const disposables: { dispose(): void }[] = [];
    loadMonaco().then(
      async (m) => {
        try {
          await applyTypings(m, kind);
        } catch (err) {
          if (live) setTypingsError(err instanceof Error ? err.message : String(err));
        }
        if (!live || !host.current) return;
        const { monaco: api } = m;
        const model = api.editor.createModel(value, 'typescript', api.Uri.parse(`file:///gridgate/${kind}-${++modelCounter}.ts`));
        const editor = api.editor.create(host.current, {
          model,
          ariaLabel: label,
          automaticLayout: true,
          minimap: { enabled: false },
          wordWrap: 'on',
          fontSize: 14,
          tabSize: 2,
          insertSpaces: true,
          scrollBeyondLastLine: false,
          fixedOverflowWidgets: true,
          theme: scheme.value === 'dark' ? 'gridgate-dark' : 'gridgate-light',
          renderValidationDecorations: 'on',
          // unused code is not faded (too little contrast to read): the problems list names what matters
          showUnused: false,
        });
        editorRef.current = editor;
        const readMarkers = () => {
          const list = api.editor
            .getModelMarkers({ resource: model.uri })
            .filter((mk) => mk.severity >= api.MarkerSeverity.Warning)
            .map((mk): Problem => ({
              line: mk.startLineNumber,
              column: mk.startColumn,
              message: mk.message,
              severity: mk.severity === api.MarkerSeverity.Error ? 'error' : 'warning',
              fromRun: mk.owner === 'dry-run',
            }))
            .sort((a, b) => a.line - b.line || a.column - b.column);
          setProblems(list);
        };
        disposables.push(
          model.onDidChangeContent(() => {
            const text = model.getValue();
            emitted.current.add(text);
            if (emitted.current.size > 200) emitted.current.delete(emitted.current.values().next().value!);
            onChangeRef.current(text);
          }),
          api.editor.onDidChangeMarkers((uris) => {
            if (uris.some((u) => u.toString() === model.uri.toString())) readMarkers();
          }),
          editor,
          model,
        );
        setMonaco(m);
      },
      (err: unknown) => live && setFailed(err),
    );
    return () => {
      live = false;
      editorRef.current = null;
      for (const d of disposables.reverse()) d.dispose();
    };
  }, [kind]);

  // a value set from outside (a reset) replaces the text; the editor's own edits come back, maybe a few keys late
  useEffect(() => {
    const model = editorRef.current?.getModel();
    if (!model || model.getValue() === value || emitted.current.has(value)) return;
    emitted.current.clear();
    model.setValue(value);
  }, [value, monaco]);

  useEffect(() => {
    if (editorRef.current) editorRef.current.updateOptions({ ariaLabel: label });
  }, [label, monaco]);

  useEffect(() => {
    monaco?.monaco.editor.setTheme(dark ? 'gridgate-dark' : 'gridgate-light');
  }, [dark, monaco]);

  // the dry run's failure at its line and column (to the end of the line: the run names a point, not a range)
  const markerKey = JSON.stringify(markers);
  useEffect(() => {
    const model = editorRef.current?.getModel();
    if (!monaco || !model) return;
    const api = monaco.monaco;
    api.editor.setModelMarkers(
      model,
      'dry-run',
      markers.map((mk) => {
        const line = Math.min(Math.max(1, mk.line), model.getLineCount());
        const column = Math.max(1, mk.column ?? 1);
        return {
          severity: api.MarkerSeverity.Error,
          message: mk.message,
          startLineNumber: line,
          startColumn: column,
          endLineNumber: line,
          endColumn: Math.max(column + 1, model.getLineMaxColumn(line)),
        };
      }),
    );
  }, [markerKey, monaco]);

  const reveal = (p: Problem) => {
    const editor = editorRef.current;
    if (!editor) return;
    editor.setPosition({ lineNumber: p.line, column: p.column });
    editor.revealLineInCenter(p.line);
    editor.focus();
  };

  if (failed) {
    return (
      <div class="code-editor">
        <ErrorBox error={failed} />
        <p class="muted">{t('fallback')}</p>
        <textarea
          class="mono code-fallback"
          aria-label={label}
          value={value}
          spellcheck={false}
          style={{ height }}
          onInput={(e) => onChange((e.target as HTMLTextAreaElement).value)}
        />
      </div>
    );
  }

  const errors = problems.filter((p) => p.severity === 'error').length;
  return (
    <div class="code-editor" data-markers={problems.length} data-errors={errors}>
      {!monaco && <Loading />}
      <div class="code-host" ref={host} style={{ height }} data-ready={monaco ? 'true' : 'false'} />
      <p class="muted small">{t('tabHint')}</p>
      {typingsError && <p class="warn small">{t('noTypings', { message: typingsError })}</p>}
      <div class="problems">
        <p class="problems-title" role="status">
          {t('problems')}: {problems.length}
        </p>
        {problems.length === 0 ? (
          <p class="muted small">{monaco ? t('none') : t('loading')}</p>
        ) : (
          <ul>
            {problems.map((p, i) => (
              <li
                key={i}
                class={p.severity === 'error' ? 'bad' : 'warn'}
                data-line={p.line}
                data-column={p.column}
                data-source={p.fromRun ? 'run' : 'typescript'}
              >
                <button type="button" class="link" onClick={() => reveal(p)}>
                  <span class="where">{t('at', { line: p.line, column: p.column })}</span> <span class="kind">({p.fromRun ? t('run') : t(p.severity)})</span>{' '}
                  <span class="message">{p.message}</span>
                </button>
              </li>
            ))}
          </ul>
        )}
      </div>
    </div>
  );
}
