import { ApiError } from '../http/api-error.js';
import { DEFAULT_TENANT, type Principal } from './principal.js';

/**
 * Routes that act on every tenant at once (metrics, rebuilds) belong to the operator, the admins
 * of the default tenant: another tenant's admin would learn how busy the others are, or rebuild their read models.
 */
export function requireOperator(principal: Principal): void {
  if (principal.tenant === DEFAULT_TENANT) return;
  throw new ApiError(403, 'forbidden', 'this route acts on every tenant; it is for admins of the default tenant', undefined, 'tenant');
}
