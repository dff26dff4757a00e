// Monaco, as little of it as the workbench needs: the editor's API, its contributions, TypeScript's tokenizer and
// its language service in a worker. Not the eighty other languages, the LSP client or the CSS/HTML/JSON services
// that editor.main.js brings. This module is only ever reached through import() when an editor opens
// (CodeEditor.tsx): none of it is in the console's first load.
import * as monaco from 'monaco-editor/editor/editor.api.js';
import { typescriptDefaults } from 'monaco-editor/languages/features/typescript/register.js';
import 'monaco-editor/languages/definitions/typescript/register.js';
// Monaco 0.57's TypeScript worker manager imports every editor contribution (suggest, hover, find, code lens, drop,
// ...) through internal/common/workers.js. Loaded later, with the language, they would register services after the
// first editor made its own (a second editor then fails: "depends on UNKNOWN service"): so all of them come first.
import 'monaco-editor/internal/common/workers.js';
import 'monaco-editor/features/codicon/register.js';

// The workers are modules of this origin (worker-src 'self'): no eval, no blob of fetched code.
(self as unknown as { MonacoEnvironment: monaco.Environment }).MonacoEnvironment = {
  getWorker(_workerId: string, label: string): Worker {
    if (label === 'typescript' || label === 'javascript') {
      return new Worker(new URL('monaco-editor/language/typescript/ts.worker.js', import.meta.url), { type: 'module', name: label });
    }
    return new Worker(new URL('monaco-editor/editor/editor.worker.js', import.meta.url), { type: 'module', name: label });
  },
};

// Supplier code runs in a sandbox with the language and nothing of a browser or of Node.js: no DOM in its lib.
typescriptDefaults.setCompilerOptions({
  target: 99 /* ESNext */,
  lib: ['es2023'],
  strict: true,
  noImplicitAny: false,
  allowNonTsExtensions: true,
  noEmit: true,
  isolatedModules: false,
});
typescriptDefaults.setDiagnosticsOptions({ noSemanticValidation: false, noSyntaxValidation: false, onlyVisible: false });

// Monaco's own themes with line numbers that pass WCAG AA contrast (its grey ones, and the dimmed number of the
// line after a final newline, do not), in the console's colours.
monaco.editor.defineTheme('gridgate-light', {
  base: 'vs',
  inherit: true,
  rules: [],
  colors: { 'editorLineNumber.foreground': '#57606a', 'editorLineNumber.dimmedForeground': '#57606a', 'editorLineNumber.activeForeground': '#1b1f24' },
});
monaco.editor.defineTheme('gridgate-dark', {
  base: 'vs-dark',
  inherit: true,
  rules: [],
  colors: {
    'editor.background': '#0d1117',
    'editorLineNumber.foreground': '#9da7b3',
    'editorLineNumber.dimmedForeground': '#9da7b3',
    'editorLineNumber.activeForeground': '#e6edf3',
  },
});

export { monaco, typescriptDefaults };
