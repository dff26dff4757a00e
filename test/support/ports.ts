// One port picker for the tests, the bench and the fleet: scripts/fleet/ports.ts.
export { freePort } from '../../scripts/fleet/ports.ts';
