// A report type's parser in the editor, tried on a payload (POST /supplier-report-type/:hashId/dry-run).
import { useState } from 'preact/hooks';
import { translated } from '../i18n.ts';
import type { PageProps } from '../pages.ts';
import { CodePage, Json, MeasurementTable, t, type RunCommon } from './code/parts.tsx';

interface Answer extends RunCommon {
  report: {
    generatedAt: string;
    fields: unknown;
    measurements: {
      channelIndex: number;
      channelMeasurementIndex: number;
      quantityHashId: string;
      generatedAt: string;
      orderOfMagnitude: number;
      significand: number;
    }[];
  } | null;
}

export default function ReportTypeEditor({ params }: PageProps) {
  const [payload, setPayload] = useState('{"at": "2026-01-01T00:00:00Z"}');
  return (
    <CodePage<Answer>
      kind="parser"
      base="/supplier-report-type/"
      hashId={params.hashId}
      field="parser"
      listPath="/report-types"
      load={(a) => ({ name: translated((a.reportType as { name: unknown }).name), code: a.parser as string })}
      tryInput={() => ({ payload })}
      tryFields={
        <div class="field">
          <label for="try-payload">{t('payload')}</label>
          <textarea id="try-payload" class="mono" value={payload} spellcheck={false} onInput={(e) => setPayload((e.target as HTMLTextAreaElement).value)} />
        </div>
      }
      result={(a) =>
        a.report ? (
          <>
            <h3>{t('report')}</h3>
            <p>
              {t('generatedAt')}: {a.report.generatedAt}
            </p>
            <h3>{t('measurements')}</h3>
            <MeasurementTable rows={a.report.measurements} caption={t('measurements')} />
            {a.report.fields !== undefined && a.report.fields !== null && (
              <>
                <h3>{t('fields')}</h3>
                <Json value={a.report.fields} />
              </>
            )}
          </>
        ) : (
          <p class="muted">{t('noReport')}</p>
        )
      }
    />
  );
}
