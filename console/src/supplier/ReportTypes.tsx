// The supplier's report types: their parsers turn what an event handler passes to exec.parseReport into reports.
import { messages, translated } from '../i18n.ts';
import type { PageProps } from '../pages.ts';
import { CodeList } from './code/parts.tsx';

const t = messages({ title: 'Report types' }, { title: 'Rapporttypes' });

interface Row {
  reportType: { hashId: string; name: unknown };
}

export default function ReportTypes(_: PageProps) {
  return (
    <CodeList
      title={t('title')}
      kind="parser"
      base="/supplier-report-type/"
      editorPath="/report-types"
      rowsOf={(a) => (a.rows as Row[]).map((r) => ({ hashId: r.reportType.hashId, name: translated(r.reportType.name) }))}
      addBody={(name, parser) => ({ name, parser, fieldConfigurations: { pinGroup: [], pin: [], measurement: [] } })}
    />
  );
}
