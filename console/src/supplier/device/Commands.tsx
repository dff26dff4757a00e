// A device's commands: send one (command add, the command types its device type allows, their fields as a form),
// and the pending (not yet handed to the device) and sent ones (command find); a pending one can be deleted.
import { useState } from 'preact/hooks';
import { api } from '../../api.ts';
import { formatDate, messages, translated } from '../../i18n.ts';
import { Empty, ErrorBox, Field, Loading, TextInput, useAsync } from '../../ui.tsx';
import { Ago } from '../parts.tsx';
import type { Command, CommandType, FieldConfiguration } from './types.ts';

const t = messages(
  {
    send: 'Send a command',
    type: 'Command type',
    pick: 'Choose a command type',
    noTypes: 'This device type allows no command types. Add one to its commandTypeHashIds on the device type page.',
    delay: 'Delay (seconds)',
    delayHint: 'How long from now the device should carry it out',
    startAt: 'Start at',
    endAt: 'End at',
    channels: 'Channel indices',
    channelsHint: 'Comma-separated, e.g. 0, 2',
    email: 'Mail when carried out (optional)',
    emailHint: 'Comma-separated addresses',
    submit: 'Send command',
    sent: 'Command added: it is pending until the device is given it.',
    pending: 'Pending',
    sentList: 'Sent',
    none: 'None.',
    created: 'Added',
    sentAt: 'Sent',
    fields: 'Fields',
    start: 'Start',
    remove: 'Delete',
    actions: 'Actions',
    yes: 'yes',
    no: 'no',
    pendingCaption: 'Pending commands',
    sentCaption: 'Commands sent to the device',
    removed: 'Command deleted.',
  },
  {
    send: 'Een commando sturen',
    type: 'Commandotype',
    pick: 'Kies een commandotype',
    noTypes: 'Dit apparaattype staat geen commandotypes toe. Voeg er een toe aan de commandTypeHashIds op de pagina van het apparaattype.',
    delay: 'Vertraging (seconden)',
    delayHint: 'Hoe lang vanaf nu het apparaat het moet uitvoeren',
    startAt: 'Start om',
    endAt: 'Einde om',
    channels: 'Kanaalnummers',
    channelsHint: "Gescheiden door komma's, bijv. 0, 2",
    email: 'Mail bij uitvoering (optioneel)',
    emailHint: "Adressen gescheiden door komma's",
    submit: 'Commando sturen',
    sent: 'Commando toegevoegd: het wacht tot het apparaat het krijgt.',
    pending: 'Wachtend',
    sentList: 'Verstuurd',
    none: 'Geen.',
    created: 'Toegevoegd',
    sentAt: 'Verstuurd',
    fields: 'Velden',
    start: 'Start',
    remove: 'Verwijderen',
    actions: 'Acties',
    yes: 'ja',
    no: 'nee',
    pendingCaption: "Wachtende commando's",
    sentCaption: "Commando's verstuurd naar het apparaat",
    removed: 'Commando verwijderd.',
  },
);

interface Row {
  command: Command;
  commandType: CommandType;
}

export function Commands({ deviceHashId, commandTypes, refresh }: { deviceHashId: string; commandTypes: CommandType[]; refresh: number }) {
  const [tick, setTick] = useState(0);
  const [notice, setNotice] = useState('');
  const list = useAsync(
    (signal) => api<{ rows: Row[] }>('GET', '/command/', { signal, query: { deviceHashId, rowsPerPage: 100, sortBy: 'createdAt', descending: true } }),
    [deviceHashId, tick, refresh],
  );
  const remove = async (hashId: string) => {
    try {
      await api('DELETE', `/command/${encodeURIComponent(hashId)}`);
      setNotice(t('removed'));
      setTick((n) => n + 1);
    } catch (err) {
      setNotice('');
      list.reload();
      throw err;
    }
  };
  const pending = list.data?.rows.filter((r) => r.command.sentAt === null) ?? [];
  const sent = list.data?.rows.filter((r) => r.command.sentAt !== null) ?? [];
  return (
    <div>
      <SendCommand
        deviceHashId={deviceHashId}
        commandTypes={commandTypes}
        onSent={() => {
          setNotice(t('sent'));
          setTick((n) => n + 1);
        }}
      />
      <p role="status" class="ok">
        {notice}
      </p>
      <ErrorBox error={list.error} onRetry={list.reload} />
      {list.loading && !list.data && <Loading />}
      {list.data && (
        <div class="grid-2">
          <div>
            <h3>
              {t('pending')} ({pending.length})
            </h3>
            <CommandTable rows={pending} caption={t('pendingCaption')} onRemove={remove} />
          </div>
          <div>
            <h3>
              {t('sentList')} ({sent.length})
            </h3>
            <CommandTable rows={sent} caption={t('sentCaption')} />
          </div>
        </div>
      )}
    </div>
  );
}

function CommandTable({ rows, caption, onRemove }: { rows: Row[]; caption: string; onRemove?: (hashId: string) => Promise<void> }) {
  const [error, setError] = useState<unknown>(null);
  if (rows.length === 0) return <Empty>{t('none')}</Empty>;
  return (
    <>
      <ErrorBox error={error} />
      <table class="commands">
        <caption class="sr-only">{caption}</caption>
        <thead>
          <tr>
            <th scope="col">{t('type')}</th>
            <th scope="col">{t('fields')}</th>
            <th scope="col">{onRemove ? t('start') : t('sentAt')}</th>
            {onRemove && <th scope="col">{t('actions')}</th>}
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => (
            <tr key={r.command.hashId} data-command={r.command.hashId}>
              <td>
                {translated(r.commandType.name)}
                <div class="muted small">
                  <code>{r.command.hashId}</code> · {t('created')} <Ago iso={r.command.createdAt} />
                </div>
              </td>
              <td>
                <FieldValues fields={r.command.fields} configs={r.commandType.fieldConfigurations} />
              </td>
              <td>{onRemove ? r.command.startAt ? formatDate(r.command.startAt) : '–' : <Ago iso={r.command.sentAt} />}</td>
              {onRemove && (
                <td>
                  <button
                    type="button"
                    class="danger"
                    onClick={() => {
                      setError(null);
                      onRemove(r.command.hashId).catch(setError);
                    }}
                  >
                    {t('remove')}
                  </button>
                </td>
              )}
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

function FieldValues({ fields, configs }: { fields: Record<string, unknown>; configs: FieldConfiguration[] }) {
  const keys = Object.keys(fields);
  if (keys.length === 0) return <span class="muted">–</span>;
  const name = (key: string) => translated(configs.find((c) => c.key === key)?.name) || key;
  return (
    <ul class="plain">
      {keys.map((k) => (
        <li key={k}>
          {name(k)}: <span class="mono">{typeof fields[k] === 'string' ? (fields[k] as string) : JSON.stringify(fields[k])}</span>
        </li>
      ))}
    </ul>
  );
}

const isBoolean = (c: FieldConfiguration) =>
  c.type === 'boolean' || c.inputType === 'switch' || c.inputType === 'checkbox' || typeof c.valueOptions?.[0]?.value === 'boolean';
const isNumber = (c: FieldConfiguration) => c.type === 'number' || c.type === 'integer' || typeof c.valueOptions?.[0]?.value === 'number';

/** The initial value of each field: its defaultValue, else empty. */
function initialValues(configs: FieldConfiguration[]): Record<string, string | boolean> {
  return Object.fromEntries(
    configs.map((c) => [c.key, isBoolean(c) ? c.defaultValue === true : c.defaultValue === undefined || c.defaultValue === null ? '' : String(c.defaultValue)]),
  );
}

/** The form's values as the command's fields: numbers as numbers, an empty optional field left out. */
function toFields(configs: FieldConfiguration[], values: Record<string, string | boolean>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const c of configs) {
    const v = values[c.key];
    if (typeof v === 'boolean') out[c.key] = v;
    else if (v === '' || v === undefined) continue;
    else if (c.valueOptions?.length) out[c.key] = c.valueOptions.find((o) => String(o.value) === v)?.value ?? v;
    else out[c.key] = isNumber(c) ? Number(v) : v;
  }
  return out;
}

function SendCommand({ deviceHashId, commandTypes, onSent }: { deviceHashId: string; commandTypes: CommandType[]; onSent: () => void }) {
  const [typeHashId, setTypeHashId] = useState(commandTypes.length === 1 ? commandTypes[0].hashId : '');
  const type = commandTypes.find((c) => c.hashId === typeHashId);
  const [values, setValues] = useState<Record<string, string | boolean>>(type ? initialValues(type.fieldConfigurations) : {});
  const [delay, setDelay] = useState('0');
  const [startAt, setStartAt] = useState('');
  const [endAt, setEndAt] = useState('');
  const [channels, setChannels] = useState('');
  const [email, setEmail] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);

  if (commandTypes.length === 0) return <p class="muted">{t('noTypes')}</p>;
  const choose = (hashId: string) => {
    setTypeHashId(hashId);
    const next = commandTypes.find((c) => c.hashId === hashId);
    setValues(next ? initialValues(next.fieldConfigurations) : {});
  };
  const submit = async (e: Event) => {
    e.preventDefault();
    if (!type) return;
    setBusy(true);
    setError(null);
    try {
      await api('POST', '/command/', {
        body: {
          objectType: 'device',
          objectHashIds: [deviceHashId],
          commandTypeHashId: type.hashId,
          fields: toFields(type.fieldConfigurations, values),
          ...(type.start === 'required' ? { startAt: new Date(startAt).toISOString() } : type.start === 'optional' ? { delay: Number(delay) || 0 } : {}),
          ...(type.end !== 'disabled' && endAt ? { endAt: new Date(endAt).toISOString() } : {}),
          ...(type.channelSelect !== 'off' && channels.trim() ? { channelIndices: channels.split(',').map((c) => Number(c.trim())) } : {}),
          email: email
            .split(',')
            .map((m) => m.trim())
            .filter(Boolean),
        },
      });
      onSent();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form onSubmit={submit} class="send-command">
      <h3>{t('send')}</h3>
      <Field label={t('type')}>
        {(id) => (
          <select id={id} value={typeHashId} required onChange={(e) => choose((e.target as HTMLSelectElement).value)} name="commandType">
            <option value="">{t('pick')}</option>
            {commandTypes.map((c) => (
              <option key={c.hashId} value={c.hashId}>
                {translated(c.name)}
              </option>
            ))}
          </select>
        )}
      </Field>
      {type && (
        <>
          {type.fieldConfigurations.map((c) => (
            <CommandField key={c.key} config={c} value={values[c.key]} onChange={(v) => setValues((old) => ({ ...old, [c.key]: v }))} />
          ))}
          <div class="row">
            {type.start === 'optional' && <TextInput label={t('delay')} hint={t('delayHint')} type="number" value={delay} onInput={setDelay} name="delay" />}
            {type.start === 'required' && <TextInput label={t('startAt')} type="datetime-local" value={startAt} onInput={setStartAt} required name="startAt" />}
            {type.end !== 'disabled' && (
              <TextInput label={t('endAt')} type="datetime-local" value={endAt} onInput={setEndAt} required={type.end === 'required'} name="endAt" />
            )}
            {type.channelSelect !== 'off' && (
              <TextInput label={t('channels')} hint={t('channelsHint')} value={channels} onInput={setChannels} name="channelIndices" />
            )}
          </div>
          <TextInput label={t('email')} hint={t('emailHint')} value={email} onInput={setEmail} name="email" />
        </>
      )}
      <ErrorBox error={error} />
      <button type="submit" class="primary" disabled={busy || !type}>
        {t('submit')}
      </button>
    </form>
  );
}

function CommandField({
  config,
  value,
  onChange,
}: {
  config: FieldConfiguration;
  value: string | boolean | undefined;
  onChange: (v: string | boolean) => void;
}) {
  const label = translated(config.name) || config.key;
  const hint = translated(config.hint) || undefined;
  const required = config.allowNull === false;
  if (isBoolean(config)) {
    return (
      <div class="field">
        <label class="inline">
          <input type="checkbox" checked={value === true} onChange={(e) => onChange((e.target as HTMLInputElement).checked)} name={config.key} /> {label}
        </label>
        {hint && <small class="muted">{hint}</small>}
      </div>
    );
  }
  if (config.valueOptions?.length) {
    return (
      <Field label={label} hint={hint}>
        {(id) => (
          <select id={id} value={String(value ?? '')} required={required} name={config.key} onChange={(e) => onChange((e.target as HTMLSelectElement).value)}>
            <option value="" />
            {config.valueOptions!.map((o) => (
              <option key={String(o.value)} value={String(o.value)}>
                {translated(o.text) || String(o.value)}
              </option>
            ))}
          </select>
        )}
      </Field>
    );
  }
  return (
    <TextInput
      label={label}
      hint={hint}
      type={isNumber(config) ? 'number' : 'text'}
      value={String(value ?? '')}
      onInput={onChange}
      required={required}
      name={config.key}
    />
  );
}
