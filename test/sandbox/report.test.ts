import { describe, expect, it } from 'vitest';
import { validateIncomingRequestResponse, validateParsedReport } from '../../src/sandbox/report.ts';

const at = new Date('2024-05-01T00:00:00.000Z');
const m = (over: Record<string, unknown> = {}) => ({ channelIndex: 0, quantityHashId: 'q', orderOfMagnitude: 0, significand: 1, ...over });

describe('validateParsedReport', () => {
  it('normalises dates and rounds near-integer significands', () => {
    const r = validateParsedReport(
      { generatedAt: '2024-05-01T12:00:00Z', measurements: [m({ significand: 3.06 * 1000 }), m({ generatedAt: 1714561200000 })] },
      at,
    );
    expect(r).toEqual({
      ok: true,
      notes: [],
      value: {
        generatedAt: '2024-05-01T12:00:00.000Z',
        measurements: [
          { ...m({ significand: 3060 }), generatedAt: '2024-05-01T12:00:00.000Z' },
          { ...m(), generatedAt: '2024-05-01T11:00:00.000Z' },
        ],
      },
    });
  });

  it('uses the run time when generatedAt is missing, with a note', () => {
    const r = validateParsedReport({ measurements: [] }, at);
    expect(r.ok && r.value.generatedAt).toBe(at.toISOString());
    expect(r.ok && r.notes[0]).toMatch(/generatedAt missing/);
  });

  it.each([
    [{ significand: 3.5 }, 'measurements[2].significand 3.5 is not an integer'],
    [{ significand: 2 ** 31 }, 'measurements[2].significand 2147483648 is out of the signed 32-bit range'],
    [{ significand: { nonFinite: 'NaN' } }, 'measurements[2].significand NaN is not a finite number'],
    [{ orderOfMagnitude: 200 }, 'measurements[2].orderOfMagnitude 200 is out of range -128..127'],
    [{ orderOfMagnitude: 1.5 }, 'measurements[2].orderOfMagnitude 1.5 is not an integer'],
    [{ channelIndex: -1 }, 'measurements[2].channelIndex -1 is not an integer >= 0'],
    [{ quantityHashId: 5 }, 'measurements[2].quantityHashId 5 is not a non-empty string'],
    [{ generatedAt: 'yesterday' }, 'measurements[2].generatedAt "yesterday" is not a valid date'],
  ])('rejects %j', (over, message) => {
    const r = validateParsedReport({ generatedAt: at.toISOString(), measurements: [m(), m(), m(over)] }, at);
    expect(r).toEqual({ ok: false, message });
  });

  it('rejects a report that is not an object or has no measurements array', () => {
    expect(validateParsedReport(null, at).ok).toBe(false);
    expect(validateParsedReport({ generatedAt: at.toISOString() }, at)).toMatchObject({ ok: false, message: /measurements must be an array/ });
  });
});

describe('validateIncomingRequestResponse', () => {
  it('accepts nothing, plain JSON bodies and typed bodies', () => {
    expect(validateIncomingRequestResponse(undefined)).toEqual({ ok: true, value: null, notes: [] });
    expect(validateIncomingRequestResponse({ statusCode: 200, body: ['a', 1] })).toMatchObject({
      ok: true,
      value: { statusCode: 200, headers: {}, body: { type: 'json', data: ['a', 1] } },
    });
    expect(validateIncomingRequestResponse({ statusCode: 205, headers: { a: 'b' }, body: { type: 'hex', data: '0aFF' } })).toMatchObject({
      ok: true,
      value: { headers: { a: 'b' }, body: { type: 'hex', data: '0aFF' } },
    });
    expect(validateIncomingRequestResponse({ statusCode: 200, body: 'text' })).toMatchObject({ ok: true, value: { body: { type: 'json', data: 'text' } } });
  });
  it.each([
    [{ statusCode: 99 }, /statusCode 99/],
    [{ statusCode: 200.5 }, /statusCode/],
    [{ statusCode: '200' }, /statusCode/],
    [{ statusCode: 200, headers: { a: 1 } }, /headers\["a"\] 1 is not a string/],
    [{ statusCode: 200, body: { type: 'hex', data: 'xyz' } }, /hex/],
    [{ statusCode: 200, body: { type: 'string', data: 1 } }, /must be a string/],
    ['ok', /must return/],
  ])('rejects %j', (raw, message) => {
    expect(validateIncomingRequestResponse(raw)).toMatchObject({ ok: false, message });
  });
});
