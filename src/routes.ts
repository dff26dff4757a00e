import type { FastifyInstance } from 'fastify';
import type { AppContext } from './app/context.ts';
import { accountRoutes } from './accounts/routes.ts';
import { twoFactorRoutes } from './accounts/two-factor/routes.ts';
import { personRoutes } from './accounts/people/routes.ts';
import { quantityRoutes } from './monitoring/quantities/routes.ts';
import { deviceTypeRoutes } from './connectivity/device-types/routes.ts';
import { deviceRoutes } from './connectivity/devices/routes.ts';
import { activityRoutes } from './connectivity/activities/routes.ts';
import { reportTypeRoutes } from './connectivity/report-types/routes.ts';
import { commandTypeRoutes } from './connectivity/command-types/routes.ts';
import { commandRoutes } from './connectivity/commands/routes.ts';
import { DeviceEventQueue } from './pipeline/queue.ts';
import { counterKeyRoutes } from './connectivity/counter-keys/routes.ts';
import { counterRoutes } from './connectivity/counters/routes.ts';
import { claimRoutes } from './connectivity/devices/claim-routes.ts';
import { webhookRoutes } from './connectivity/webhooks/routes.ts';
import { firmwareRoutes } from './connectivity/firmware/routes.ts';
import { supplierCertificateRoutes } from './connectivity/supplier-certificates/routes.ts';
import { dryRunRoutes } from './pipeline/dry-run/routes.ts';
import { liveLogRoutes } from './connectivity/live/routes.ts';
import { environmentRoutes } from './monitoring/environments/routes.ts';
import { pinGroupRoutes } from './monitoring/pin-groups/routes.ts';
import { pinRoutes } from './monitoring/pins/routes.ts';
import { claimedDeviceReads, claimTokensOfClaimed, customerCommands, linkRoutes } from './monitoring/links/routes.ts';
import { measurementRoutes } from './monitoring/measurements/routes.ts';
import { gridRoutes } from './monitoring/grids/routes.ts';
import { graphRoutes } from './monitoring/graph/routes.ts';
import { tileRoutes } from './monitoring/tiles/routes.ts';
import { edgeRoutes } from './monitoring/edges/routes.ts';
import { nodeRoutes } from './monitoring/nodes/routes.ts';
import { analyticsRoutes } from './monitoring/analytics/routes.ts';
import { userEnvironmentSettingsRoutes } from './accounts/user-environment-settings.ts';
import { thresholdRoutes } from './monitoring/thresholds/routes.ts';
import { connectivityThresholdRoutes } from './monitoring/connectivity-thresholds/routes.ts';
import { issueRoutes } from './monitoring/issues/routes.ts';
import { issueStreamRoutes } from './monitoring/issues/stream.ts';
import { chartRoutes } from './monitoring/charts/routes.ts';
import { userRoutes } from './accounts/user-routes.ts';
import { subscriptionRoutes } from './connectivity/subscriptions/routes.ts';
import { typingsRoutes } from './connectivity/typings/routes.ts';
import { notificationRoutes } from './notifications/routes.ts';
import { pinQuantityRoutes } from './monitoring/pin-quantities/routes.ts';
import { suggestionRoutes } from './monitoring/suggestions/routes.ts';
import { labelRoutes } from './monitoring/labels/routes.ts';
import { measurementFilterRoutes } from './monitoring/measurement-filters/routes.ts';
import { settingsRoutes } from './accounts/settings/routes.ts';
import { environmentAddRoutes } from './accounts/environments/routes.ts';
import { importRequestRoutes } from './monitoring/import-requests/routes.ts';
import { environmentReportTypeRoutes } from './monitoring/report-types/routes.ts';
import { reportRoutes } from './monitoring/reports/manual-routes.ts';
import { auditRoutes } from './audit/routes.ts';
import { exportRoutes } from './monitoring/exports/routes.ts';
import { consoleRoutes } from './api/console.ts';

/** Every feature's routes, in one list: a newcomer finds each operation's file from here. */
export const ROUTES: ((app: FastifyInstance, ctx: AppContext) => Promise<void>)[] = [
  accountRoutes,
  twoFactorRoutes,
  personRoutes,
  quantityRoutes,
  deviceTypeRoutes,
  // a monitoring environment reads the devices it claimed through links/
  (app, ctx) => deviceRoutes(app, ctx, claimedDeviceReads(ctx)),
  activityRoutes,
  reportTypeRoutes,
  commandTypeRoutes,
  (app, ctx) => commandRoutes(app, ctx, () => new DeviceEventQueue(ctx), customerCommands(ctx)),
  counterKeyRoutes,
  counterRoutes,
  (app, ctx) => claimRoutes(app, ctx, claimTokensOfClaimed(ctx)),
  webhookRoutes,
  firmwareRoutes,
  supplierCertificateRoutes,
  dryRunRoutes,
  liveLogRoutes,
  environmentRoutes,
  pinGroupRoutes,
  pinRoutes,
  linkRoutes,
  measurementRoutes,
  gridRoutes,
  graphRoutes,
  tileRoutes,
  edgeRoutes,
  nodeRoutes,
  analyticsRoutes,
  userEnvironmentSettingsRoutes,
  thresholdRoutes,
  connectivityThresholdRoutes,
  issueRoutes,
  issueStreamRoutes,
  chartRoutes,
  userRoutes,
  subscriptionRoutes,
  typingsRoutes,
  notificationRoutes,
  pinQuantityRoutes,
  suggestionRoutes,
  labelRoutes,
  measurementFilterRoutes,
  settingsRoutes,
  environmentAddRoutes,
  importRequestRoutes,
  environmentReportTypeRoutes,
  reportRoutes,
  auditRoutes,
  exportRoutes,
  // the browser console at / (console/, served from dist/console)
  consoleRoutes,
];

export async function registerRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  for (const register of ROUTES) await register(app, ctx);
}
