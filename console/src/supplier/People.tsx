// People (/people, either environment type): the users of the environment (user find), inviting a person by mail
// (user add), their rights as checkboxes from the environment type's list (user update), removing them (user
// delete); and the signed-in person's own alerts: a connectivity environment's subscriptions to failures of its
// code (subscription find/add/delete), a monitoring environment's issue notification level (userEnvironmentSettings).
import './device/device.css';
import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { messages, translated } from '../i18n.ts';
import type { PageProps } from '../pages.ts';
import { session } from '../session.ts';
import { Empty, ErrorBox, Field, Loading, PageTitle, TextInput, useAsync } from '../ui.tsx';
import { Ago, Section } from './parts.tsx';

// the environment types' rights (src/accounts/store.ts MONITORING_RIGHTS, CONNECTIVITY_RIGHTS)
export const RIGHTS = {
  monitoring: ['READ', 'STATIC', 'ISSUES', 'AUDIT_TRAIL', 'USERS', 'EXPORT', 'IMPORT', 'SENSORS', 'REPORTS', 'THRESHOLDS', 'ENVIRONMENT_ADMIN'],
  connectivity: ['ENVIRONMENT_ADMIN'],
} as const;

const t = messages(
  {
    title: 'People',
    people: 'People of this environment',
    name: 'Name',
    email: 'Email address',
    rights: 'Rights',
    twoFactor: 'Two-factor',
    actions: 'Actions',
    edit: 'Change rights',
    save: 'Save rights',
    cancel: 'Cancel',
    remove: 'Remove',
    confirmRemove: 'Remove {name} from this environment? Their sessions here end at once.',
    you: '(you)',
    machine: 'machine account',
    on: 'on',
    off: 'off',
    invite: 'Invite a person',
    inviteHint: 'They get a mail with a link to choose a password (good for 7 days).',
    language: 'Language of their mails',
    send: 'Send invitation',
    invited: 'Invitation sent to {email}.',
    saved: 'Rights of {name} saved.',
    removed: '{name} was removed.',
    atLeastOne: 'Choose at least one right.',
    search: 'Search people',
    alerts: 'My alerts',
    subsIntro: 'You are mailed when the code of these objects fails.',
    object: 'Object',
    objectType: 'Kind',
    lastMail: 'Last mail',
    since: 'Alerts since',
    unsubscribe: 'Unsubscribe',
    subscribe: 'Subscribe',
    pickType: 'Kind of object',
    pickObject: 'Object',
    choose: 'Choose…',
    noSubs: 'You have no subscriptions.',
    deviceType: 'Device type',
    supplierReportType: 'Report type',
    supplierWebhook: 'Webhook',
    supplierCertificate: 'Certificate',
    level: 'Mail me about issues',
    levelHint: 'New issues and issues that rise to this level; a grid can set its own.',
    level0: 'Every issue',
    level1: 'Serious and critical issues',
    level2: 'Critical issues only',
    levelNone: 'No issue mails',
    saveLevel: 'Save',
    levelSaved: 'Saved.',
    READ: 'Read',
    STATIC: 'Static data',
    ISSUES: 'Issues',
    AUDIT_TRAIL: 'Audit trail',
    USERS: 'People',
    EXPORT: 'Export',
    IMPORT: 'Import',
    SENSORS: 'Devices',
    REPORTS: 'Reports',
    THRESHOLDS: 'Thresholds',
    ENVIRONMENT_ADMIN: 'Administrator',
    rightsOf: 'Rights of {name}',
  },
  {
    title: 'Mensen',
    people: 'Mensen van deze omgeving',
    name: 'Naam',
    email: 'E-mailadres',
    rights: 'Rechten',
    twoFactor: 'Tweestaps',
    actions: 'Acties',
    edit: 'Rechten wijzigen',
    save: 'Rechten opslaan',
    cancel: 'Annuleren',
    remove: 'Verwijderen',
    confirmRemove: '{name} uit deze omgeving verwijderen? Hun sessies hier eindigen direct.',
    you: '(jij)',
    machine: 'machineaccount',
    on: 'aan',
    off: 'uit',
    invite: 'Iemand uitnodigen',
    inviteHint: 'Ze krijgen een mail met een link om een wachtwoord te kiezen (7 dagen geldig).',
    language: 'Taal van hun mails',
    send: 'Uitnodiging sturen',
    invited: 'Uitnodiging gestuurd naar {email}.',
    saved: 'Rechten van {name} opgeslagen.',
    removed: '{name} is verwijderd.',
    atLeastOne: 'Kies minstens één recht.',
    search: 'Mensen zoeken',
    alerts: 'Mijn meldingen',
    subsIntro: 'Je krijgt een mail als de code van deze objecten faalt.',
    object: 'Object',
    objectType: 'Soort',
    lastMail: 'Laatste mail',
    since: 'Meldingen sindsdien',
    unsubscribe: 'Afmelden',
    subscribe: 'Aanmelden',
    pickType: 'Soort object',
    pickObject: 'Object',
    choose: 'Kies…',
    noSubs: 'Je hebt geen abonnementen.',
    deviceType: 'Apparaattype',
    supplierReportType: 'Rapporttype',
    supplierWebhook: 'Webhook',
    supplierCertificate: 'Certificaat',
    level: 'Mail me over meldingen',
    levelHint: 'Nieuwe meldingen en meldingen die tot dit niveau stijgen; een netwerk kan een eigen niveau hebben.',
    level0: 'Elke melding',
    level1: 'Ernstige en kritieke meldingen',
    level2: 'Alleen kritieke meldingen',
    levelNone: 'Geen mails over meldingen',
    saveLevel: 'Opslaan',
    levelSaved: 'Opgeslagen.',
    READ: 'Lezen',
    STATIC: 'Statische gegevens',
    ISSUES: 'Meldingen',
    AUDIT_TRAIL: 'Audittrail',
    USERS: 'Mensen',
    EXPORT: 'Exporteren',
    IMPORT: 'Importeren',
    SENSORS: 'Apparaten',
    REPORTS: 'Rapporten',
    THRESHOLDS: 'Drempels',
    ENVIRONMENT_ADMIN: 'Beheerder',
    rightsOf: 'Rechten van {name}',
  },
);

type Right = (typeof RIGHTS.monitoring)[number];
interface UserRow {
  user: { hashId: string; name: string; email: string | null; locale: string; rights: string[]; twoFactorAuthenticationEnabled: boolean };
  rights: string[];
}

export default function People(_: PageProps) {
  const s = session.value!;
  const type = s.environment.type;
  const [search, setSearch] = useState('');
  const [notice, setNotice] = useState('');
  const list = useAsync(
    (signal) => api<{ rows: UserRow[] }>('GET', '/user/', { signal, query: { search: search.trim() || undefined, rowsPerPage: 100 } }),
    [search],
  );
  const done = (message: string) => {
    setNotice(message);
    list.reload();
  };
  return (
    <section>
      <PageTitle>{t('title')}</PageTitle>
      <p role="status" class="ok">
        {notice}
      </p>
      <Section title={t('people')} id="people">
        <div class="filters">
          <TextInput label={t('search')} type="search" value={search} onInput={setSearch} name="search" />
        </div>
        <ErrorBox error={list.error} onRetry={list.reload} />
        {list.loading && !list.data && <Loading />}
        {list.data &&
          (list.data.rows.length === 0 ? (
            <Empty />
          ) : (
            <table class="people">
              <caption class="sr-only">{t('people')}</caption>
              <thead>
                <tr>
                  <th scope="col">{t('name')}</th>
                  <th scope="col">{t('email')}</th>
                  <th scope="col">{t('rights')}</th>
                  <th scope="col">{t('twoFactor')}</th>
                  <th scope="col">{t('actions')}</th>
                </tr>
              </thead>
              <tbody>
                {list.data.rows.map((r) => (
                  <Person key={r.user.hashId} row={r} type={type} self={r.user.hashId === s.user.hashId} onDone={done} />
                ))}
              </tbody>
            </table>
          ))}
      </Section>
      <Section title={t('invite')} id="invite">
        <Invite type={type} onDone={done} />
      </Section>
      <Section title={t('alerts')} id="alerts">
        {type === 'connectivity' ? <Subscriptions /> : <IssueLevel environmentHashId={s.environment.hashId} />}
      </Section>
    </section>
  );
}

function RightsBoxes({
  type,
  value,
  onChange,
  legend,
}: {
  type: 'monitoring' | 'connectivity';
  value: string[];
  onChange: (v: string[]) => void;
  legend: string;
}) {
  return (
    <fieldset class="rights">
      <legend>{legend}</legend>
      {(RIGHTS[type] as readonly Right[]).map((r) => (
        <label class="inline" key={r}>
          <input
            type="checkbox"
            name="rights"
            value={r}
            checked={value.includes(r)}
            onChange={(e) => onChange((e.target as HTMLInputElement).checked ? [...value, r] : value.filter((x) => x !== r))}
          />{' '}
          {t(r)} <code class="muted small">{r}</code>
        </label>
      ))}
    </fieldset>
  );
}

function Person({ row, type, self, onDone }: { row: UserRow; type: 'monitoring' | 'connectivity'; self: boolean; onDone: (message: string) => void }) {
  const u = row.user;
  const [editing, setEditing] = useState(false);
  const [rights, setRights] = useState<string[]>(row.rights);
  const [error, setError] = useState<unknown>(null);
  const save = async (e: Event) => {
    e.preventDefault();
    if (rights.length === 0) return setError(new Error(t('atLeastOne')));
    setError(null);
    try {
      await api('POST', `/user/${encodeURIComponent(u.hashId)}`, { body: { rights } });
      setEditing(false);
      onDone(t('saved', { name: u.name }));
    } catch (err) {
      setError(err);
    }
  };
  const remove = async () => {
    if (!confirm(t('confirmRemove', { name: u.name }))) return;
    setError(null);
    try {
      await api('DELETE', `/user/${encodeURIComponent(u.hashId)}`);
      onDone(t('removed', { name: u.name }));
    } catch (err) {
      setError(err);
    }
  };
  return (
    <tr data-user={u.email ?? u.hashId}>
      <td>
        {u.name} {self && <span class="muted">{t('you')}</span>}
      </td>
      <td>{u.email ?? <span class="muted">{t('machine')}</span>}</td>
      <td>
        {editing ? (
          <form onSubmit={save}>
            <RightsBoxes type={type} value={rights} onChange={setRights} legend={t('rightsOf', { name: u.name })} />
            <div class="row">
              <button type="submit" class="primary">
                {t('save')}
              </button>
              <button
                type="button"
                onClick={() => {
                  setEditing(false);
                  setRights(row.rights);
                }}
              >
                {t('cancel')}
              </button>
            </div>
          </form>
        ) : (
          row.rights.map((r) => t(r as Right) || r).join(', ')
        )}
        <ErrorBox error={error} />
      </td>
      <td>{u.twoFactorAuthenticationEnabled ? t('on') : t('off')}</td>
      <td class="actions-cell">
        {!editing && (
          <button type="button" onClick={() => setEditing(true)} aria-label={`${t('edit')}: ${u.name}`}>
            {t('edit')}
          </button>
        )}
        {!self && (
          <button type="button" class="danger" onClick={remove} aria-label={`${t('remove')}: ${u.name}`}>
            {t('remove')}
          </button>
        )}
      </td>
    </tr>
  );
}

function Invite({ type, onDone }: { type: 'monitoring' | 'connectivity'; onDone: (message: string) => void }) {
  const [name, setName] = useState('');
  const [email, setEmail] = useState('');
  const [lang, setLang] = useState<'en' | 'nl'>(session.value?.user.locale === 'nl' ? 'nl' : 'en');
  const [rights, setRights] = useState<string[]>(type === 'monitoring' ? ['READ'] : ['ENVIRONMENT_ADMIN']);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    if (rights.length === 0) return setError(new Error(t('atLeastOne')));
    setBusy(true);
    setError(null);
    try {
      await api('POST', '/user/', { body: { name, email, rights, locale: lang } });
      onDone(t('invited', { email }));
      setName('');
      setEmail('');
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form onSubmit={submit} class="invite">
      <p class="muted small">{t('inviteHint')}</p>
      <div class="row top">
        <TextInput label={t('name')} value={name} onInput={setName} required name="name" />
        <TextInput label={t('email')} type="email" value={email} onInput={setEmail} required name="email" />
        <Field label={t('language')}>
          {(id) => (
            <select id={id} value={lang} onChange={(e) => setLang((e.target as HTMLSelectElement).value as 'en' | 'nl')} name="locale">
              <option value="en">English</option>
              <option value="nl">Nederlands</option>
            </select>
          )}
        </Field>
      </div>
      <RightsBoxes type={type} value={rights} onChange={setRights} legend={t('rights')} />
      <ErrorBox error={error} />
      <button type="submit" class="primary" disabled={busy}>
        {t('send')}
      </button>
    </form>
  );
}

const OBJECT_TYPES = {
  deviceType: { path: '/device-type/', member: 'deviceType' },
  supplierReportType: { path: '/supplier-report-type/', member: 'reportType' },
  supplierWebhook: { path: '/supplier-webhook/', member: 'webhook' },
  supplierCertificate: { path: '/supplier-certificate/', member: 'certificate' },
} as const;
type ObjectType = keyof typeof OBJECT_TYPES;

interface SubscriptionRow {
  objectName: unknown;
  subscription: { hashId: string; objectType: ObjectType; objectHashId: string; lastNotification: string | null; alertsSinceLastNotification: number };
}

function Subscriptions() {
  const list = useAsync((signal) => api<{ rows: SubscriptionRow[] }>('GET', '/subscription/', { signal, query: { rowsPerPage: 100 } }), []);
  const [objectType, setObjectType] = useState<ObjectType | ''>('');
  const [objectHashId, setObjectHashId] = useState('');
  const [error, setError] = useState<unknown>(null);
  const objects = useAsync(
    async (signal) => {
      if (!objectType) return [];
      const { path, member } = OBJECT_TYPES[objectType];
      const page = await api<{ rows: Record<string, { hashId: string; name: unknown }>[] }>('GET', path, { signal, query: { rowsPerPage: 100 } });
      return page.rows.map((r) => r[member]);
    },
    [objectType],
  );
  const subscribe = async (e: Event) => {
    e.preventDefault();
    setError(null);
    try {
      await api('POST', '/subscription/', { body: { objectType, objectHashId } });
      setObjectHashId('');
      list.reload();
    } catch (err) {
      setError(err);
    }
  };
  const unsubscribe = async (hashId: string) => {
    setError(null);
    try {
      await api('DELETE', `/subscription/${encodeURIComponent(hashId)}`);
      list.reload();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <div>
      <p class="muted small">{t('subsIntro')}</p>
      <ErrorBox error={list.error} onRetry={list.reload} />
      {list.loading && !list.data && <Loading />}
      {list.data &&
        (list.data.rows.length === 0 ? (
          <Empty>{t('noSubs')}</Empty>
        ) : (
          <table>
            <caption class="sr-only">{t('alerts')}</caption>
            <thead>
              <tr>
                <th scope="col">{t('object')}</th>
                <th scope="col">{t('objectType')}</th>
                <th scope="col">{t('lastMail')}</th>
                <th scope="col">{t('since')}</th>
                <th scope="col">{t('actions')}</th>
              </tr>
            </thead>
            <tbody>
              {list.data.rows.map((r) => (
                <tr key={r.subscription.hashId}>
                  <td>{translated(r.objectName)}</td>
                  <td>{t(r.subscription.objectType)}</td>
                  <td>
                    <Ago iso={r.subscription.lastNotification} />
                  </td>
                  <td>{r.subscription.alertsSinceLastNotification}</td>
                  <td>
                    <button type="button" onClick={() => unsubscribe(r.subscription.hashId)} aria-label={`${t('unsubscribe')}: ${translated(r.objectName)}`}>
                      {t('unsubscribe')}
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        ))}
      <form onSubmit={subscribe} class="row">
        <Field label={t('pickType')}>
          {(id) => (
            <select
              id={id}
              value={objectType}
              required
              onChange={(e) => {
                setObjectType((e.target as HTMLSelectElement).value as ObjectType);
                setObjectHashId('');
              }}
            >
              <option value="">{t('choose')}</option>
              {(Object.keys(OBJECT_TYPES) as ObjectType[]).map((k) => (
                <option key={k} value={k}>
                  {t(k)}
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field label={t('pickObject')}>
          {(id) => (
            <select id={id} value={objectHashId} required onChange={(e) => setObjectHashId((e.target as HTMLSelectElement).value)}>
              <option value="">{t('choose')}</option>
              {objects.data?.map((o) => (
                <option key={o.hashId} value={o.hashId}>
                  {translated(o.name) || o.hashId}
                </option>
              ))}
            </select>
          )}
        </Field>
        <button type="submit" class="primary">
          {t('subscribe')}
        </button>
      </form>
      <ErrorBox error={error ?? objects.error} />
    </div>
  );
}

function IssueLevel({ environmentHashId }: { environmentHashId: string }) {
  const current = useAsync(
    (signal) =>
      api<{ userEnvironmentSettings: { notificationLevel: 0 | 1 | 2 | null } }>('GET', `/environment/${encodeURIComponent(environmentHashId)}`, { signal }),
    [environmentHashId],
  );
  const [level, setLevel] = useState<string | null>(null);
  const [saved, setSaved] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const value = level ?? String(current.data?.userEnvironmentSettings.notificationLevel ?? 'null');
  const save = async (e: Event) => {
    e.preventDefault();
    setError(null);
    setSaved(false);
    try {
      await api('POST', '/settings/user-environment-settings', { body: { notificationLevel: value === 'null' ? null : Number(value) } });
      setSaved(true);
    } catch (err) {
      setError(err);
    }
  };
  if (current.error) return <ErrorBox error={current.error} onRetry={current.reload} />;
  if (!current.data) return <Loading />;
  return (
    <form onSubmit={save}>
      <Field label={t('level')} hint={t('levelHint')}>
        {(id) => (
          <select
            id={id}
            value={value}
            onChange={(e) => {
              setLevel((e.target as HTMLSelectElement).value);
              setSaved(false);
            }}
            name="notificationLevel"
          >
            <option value="0">{t('level0')}</option>
            <option value="1">{t('level1')}</option>
            <option value="2">{t('level2')}</option>
            <option value="null">{t('levelNone')}</option>
          </select>
        )}
      </Field>
      <ErrorBox error={error} />
      <button type="submit" class="primary">
        {t('saveLevel')}
      </button>{' '}
      {saved && (
        <span role="status" class="ok">
          {t('levelSaved')}
        </span>
      )}
    </form>
  );
}
