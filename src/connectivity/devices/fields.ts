// the field logic serves devices and the monitoring graph alike, so it lives in app/
export * from '../../app/fields.ts';
