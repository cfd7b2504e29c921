/**
 * Stream names carry the tenant (decision 0013): `<prefix><tenant>/<id>`, except the default
 * tenant's, which keep the names they had before tenants existed (`<prefix><id>`). Tenants never
 * hold `/` and ids never do either, so a name parses back one way only.
 */
export const DEFAULT_TENANT = 'default';

export function tenantStreamId(prefix: string, tenant: string, id: string): string {
  // An id with `/` would name another tenant's stream (the default tenant's names have no tenant part).
  if (id.includes('/')) throw new RangeError('a stream id never holds "/": validate ids where they come in');
  return tenant === DEFAULT_TENANT ? `${prefix}${id}` : `${prefix}${tenant}/${id}`;
}

export function parseTenantStreamId(prefix: string, streamId: string): { tenant: string; id: string } | undefined {
  if (!streamId.startsWith(prefix)) return undefined;
  const rest = streamId.slice(prefix.length);
  const slash = rest.indexOf('/');
  if (slash < 0) return { tenant: DEFAULT_TENANT, id: rest };
  return { tenant: rest.slice(0, slash), id: rest.slice(slash + 1) };
}
