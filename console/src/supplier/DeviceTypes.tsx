// The supplier's device types: each holds the event handler that answers its devices' requests and events.
import { messages, translated } from '../i18n.ts';
import type { PageProps } from '../pages.ts';
import { CodeList } from './code/parts.tsx';

const t = messages({ title: 'Device types' }, { title: 'Apparaattypes' });

interface Row {
  deviceType: { hashId: string; name: unknown };
}

export default function DeviceTypes(_: PageProps) {
  return (
    <CodeList
      title={t('title')}
      kind="eventHandler"
      base="/device-type/"
      editorPath="/device-types"
      rowsOf={(a) => (a.rows as Row[]).map((r) => ({ hashId: r.deviceType.hashId, name: translated(r.deviceType.name) }))}
      addBody={(name, eventHandler) => ({ name, eventHandler, fieldConfigurations: [], pinGroupFieldConfigurations: [], channels: [], commandTypeHashIds: [] })}
    />
  );
}
