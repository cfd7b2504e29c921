import { ADMIN_CONTRACT } from './admin/admin.contract.js';
import { CONSOLE_CONTRACT } from './console/console.contract.js';
import { GATEWAY_CONTRACT } from './gateway/gateway.contract.js';
import { TOOL_CALLS_CONTRACT } from './governance/tool-calls.contract.js';
import { HEALTH_CONTRACT } from './health/health.contract.js';
import { DOCS_CONTRACT, openApiDocument, type OpenApiDocument } from './http/openapi-document.js';
import { KEYS_CONTRACT } from './identity/keys.contract.js';
import { ME_CONTRACT } from './identity/me.contract.js';
import { LIVE_CONTRACT } from './live/live.contract.js';
import { METRICS_CONTRACT } from './metrics/metrics.contract.js';
import { SESSIONS_CONTRACT } from './sessions/sessions.contract.js';
import { VERIFIABLE_LOG_CONTRACT } from './verifiable-log/verifiable-log.contract.js';

/**
 * Every module's route contracts, beside its controllers. A module that adds a route adds its
 * contract to its `*.contract.ts` (and a new module its contract here): a test holds the generated
 * document to the live router, route for route.
 */
export const API_CONTRACTS = [
  HEALTH_CONTRACT,
  METRICS_CONTRACT,
  DOCS_CONTRACT,
  GATEWAY_CONTRACT,
  SESSIONS_CONTRACT,
  LIVE_CONTRACT,
  TOOL_CALLS_CONTRACT,
  VERIFIABLE_LOG_CONTRACT,
  KEYS_CONTRACT,
  ME_CONTRACT,
  CONSOLE_CONTRACT,
  ADMIN_CONTRACT,
];

export const ledgerOpenApiDocument = (): OpenApiDocument => openApiDocument(API_CONTRACTS);
