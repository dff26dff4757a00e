// A field configuration (src/app/fields.ts; the SDK's FieldConfiguration) rendered as a form: one labelled control
// per configuration, shown when its `showIf` holds, a select for `valueOptions`, a checkbox for a switch, a number
// input within `lowerbound`/`upperbound`, `regex` as the input's pattern (checked here too, so the message is ours),
// `prefix`/`suffix` beside the control, `hint` under it, names and texts in the reader's language.
// Values are typed as the service checks them: numbers as numbers, booleans as booleans, an emptied field as null.
// Every text a tenant wrote is rendered as text.
import { useRef } from 'preact/hooks';
import { messages, translated } from '../i18n.ts';

export interface FieldConfiguration {
  key: string;
  name?: unknown;
  type?: string;
  inputType?: string;
  valueOptions?: { value: unknown; text?: unknown }[];
  showIf?: { key: string; value: unknown } | null;
  hint?: unknown;
  prefix?: unknown;
  suffix?: unknown;
  regex?: string | null;
  lowerbound?: number | null;
  upperbound?: number | null;
  allowNull?: boolean;
  defaultValue?: unknown;
  [member: string]: unknown;
}

export type FieldValues = Record<string, unknown>;

export interface FieldFormProps {
  configurations: FieldConfiguration[];
  values: FieldValues;
  onChange?: (next: FieldValues) => void;
  readOnly?: boolean;
}

const t = messages(
  {
    none: '(none)',
    pattern: 'Does not match the pattern {regex}',
    atLeast: 'At least {n}',
    atMost: 'At most {n}',
    required: 'Required',
    yes: 'Yes',
    no: 'No',
    file: 'Files are added through the API',
  },
  {
    none: '(geen)',
    pattern: 'Past niet bij het patroon {regex}',
    atLeast: 'Minstens {n}',
    atMost: 'Hoogstens {n}',
    required: 'Verplicht',
    yes: 'Ja',
    no: 'Nee',
    file: 'Bestanden voeg je toe via de API',
  },
);

/** The value type a configuration governs (as src/app/fields.ts typeOf). */
export function valueType(c: FieldConfiguration): string {
  if (typeof c.type === 'string') return c.type;
  if (c.inputType === 'switch' || c.inputType === 'checkbox') return 'boolean';
  if (c.inputType === 'pinGroupHashId' || c.inputType === 'pinHashId') return 'hashId';
  const first = Array.isArray(c.valueOptions) ? c.valueOptions[0]?.value : undefined;
  if (typeof first === 'number') return 'number';
  if (typeof first === 'boolean') return 'boolean';
  return 'string';
}

/** Whether a configuration is shown with these values: its showIf names another field and the value it must have. */
export function shown(c: FieldConfiguration, values: FieldValues): boolean {
  if (!c.showIf || typeof c.showIf !== 'object') return true;
  const other = values[c.showIf.key];
  // the SDK states the value as text; a number or boolean field compares by its text
  return other === c.showIf.value || String(other ?? '') === String(c.showIf.value ?? '');
}

/** What is wrong with a value by its configuration (the service checks the same), or null. */
export function problem(c: FieldConfiguration, value: unknown): string | null {
  if (value === null || value === undefined || value === '') return c.allowNull === false ? t('required') : null;
  if (typeof value === 'number') {
    if (typeof c.lowerbound === 'number' && value < c.lowerbound) return t('atLeast', { n: c.lowerbound });
    if (typeof c.upperbound === 'number' && value > c.upperbound) return t('atMost', { n: c.upperbound });
  }
  if (typeof value === 'string' && typeof c.regex === 'string' && c.regex !== '') {
    try {
      if (!new RegExp(c.regex, 'u').test(value)) return t('pattern', { regex: c.regex });
    } catch {
      // a pattern this browser cannot read: the service judges it
    }
  }
  return null;
}

/** The whole form's problems by key (only of fields shown). */
export function problems(configurations: FieldConfiguration[], values: FieldValues): Record<string, string> {
  const out: Record<string, string> = {};
  for (const c of configurations) {
    if (!shown(c, values)) continue;
    const p = problem(c, values[c.key]);
    if (p) out[c.key] = p;
  }
  return out;
}

const display = (c: FieldConfiguration, v: unknown): string => {
  if (v === null || v === undefined || v === '') return '–';
  const option = c.valueOptions?.find((o) => o.value === v);
  if (option) return translated(option.text ?? String(option.value));
  if (typeof v === 'boolean') return v ? t('yes') : t('no');
  return typeof v === 'object' ? JSON.stringify(v) : String(v);
};

let formCounter = 0;

export function FieldForm({ configurations, values, onChange, readOnly }: FieldFormProps) {
  const prefix = useRef(`ff${++formCounter}`).current;
  const set = (key: string, value: unknown) => onChange?.({ ...values, [key]: value });
  const visible = configurations.filter((c) => shown(c, values) && c.inputType !== 'hidden');
  if (readOnly || !onChange) {
    return (
      <dl class="field-form read-only">
        {visible.map((c) => (
          <div key={c.key} class="field-row">
            <dt>{translated(c.name) || c.key}</dt>
            <dd>
              {c.prefix ? `${translated(c.prefix)} ` : ''}
              {display(c, values[c.key])}
              {c.suffix && values[c.key] !== null && values[c.key] !== undefined ? ` ${translated(c.suffix)}` : ''}
            </dd>
          </div>
        ))}
      </dl>
    );
  }
  return (
    <div class="field-form">
      {visible.map((c) => {
        const id = `${prefix}-${c.key}`;
        const hintId = `${id}-hint`;
        const errId = `${id}-err`;
        const value = values[c.key];
        const type = valueType(c);
        const err = problem(c, value);
        const described = [c.hint ? hintId : '', err ? errId : ''].filter(Boolean).join(' ') || undefined;
        const label = translated(c.name) || c.key;
        let control;
        if (c.inputType === 'file' || c.inputType === 'files') {
          control = (
            <span id={id} class="muted">
              {t('file')}
            </span>
          );
        } else if (Array.isArray(c.valueOptions) && c.valueOptions.length > 0) {
          const index = c.valueOptions.findIndex((o) => o.value === value);
          control = (
            <select
              id={id}
              aria-describedby={described}
              value={index < 0 ? '' : String(index)}
              onChange={(e) => {
                const i = (e.target as HTMLSelectElement).value;
                set(c.key, i === '' ? null : c.valueOptions![Number(i)].value);
              }}
            >
              {(index < 0 || c.allowNull !== false) && <option value="">{t('none')}</option>}
              {c.valueOptions.map((o, i) => (
                <option key={i} value={String(i)}>
                  {translated(o.text ?? String(o.value))}
                </option>
              ))}
            </select>
          );
        } else if (type === 'boolean') {
          control = (
            <input
              id={id}
              type="checkbox"
              aria-describedby={described}
              checked={value === true}
              onChange={(e) => set(c.key, (e.target as HTMLInputElement).checked)}
            />
          );
        } else if (type === 'number' || type === 'integer') {
          control = (
            <input
              id={id}
              type="number"
              aria-describedby={described}
              aria-invalid={err ? true : undefined}
              step={type === 'integer' ? 1 : 'any'}
              min={c.lowerbound ?? undefined}
              max={c.upperbound ?? undefined}
              value={typeof value === 'number' ? String(value) : ''}
              onInput={(e) => {
                const s = (e.target as HTMLInputElement).value;
                set(c.key, s === '' ? null : Number(s));
              }}
            />
          );
        } else if (c.inputType === 'textarea') {
          control = (
            <textarea
              id={id}
              aria-describedby={described}
              aria-invalid={err ? true : undefined}
              value={typeof value === 'string' ? value : ''}
              onInput={(e) => set(c.key, (e.target as HTMLTextAreaElement).value)}
            />
          );
        } else {
          control = (
            <input
              id={id}
              type="text"
              aria-describedby={described}
              aria-invalid={err ? true : undefined}
              value={value === null || value === undefined ? '' : String(value)}
              onInput={(e) => {
                const s = (e.target as HTMLInputElement).value;
                set(c.key, s === '' && c.allowNull !== false ? null : s);
              }}
            />
          );
        }
        return (
          <div key={c.key} class={`field${type === 'boolean' && !c.valueOptions?.length ? ' field-check' : ''}`}>
            <label for={id}>{label}</label>
            <div class="field-control">
              {c.prefix ? <span class="affix">{translated(c.prefix)}</span> : null}
              {control}
              {c.suffix ? <span class="affix">{translated(c.suffix)}</span> : null}
            </div>
            {c.hint ? (
              <small id={hintId} class="muted">
                {translated(c.hint)}
              </small>
            ) : null}
            {err ? (
              <small id={errId} class="field-error" role="alert">
                {err}
              </small>
            ) : null}
          </div>
        );
      })}
    </div>
  );
}

export default FieldForm;
