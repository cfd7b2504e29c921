export { declaredRoutes } from '../../apps/ledger/src/ledger-app.js';
