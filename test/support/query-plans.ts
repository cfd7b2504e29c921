/** A node of the plan `EXPLAIN (ANALYZE, FORMAT JSON)` gives (row counts are per loop). */
export interface PlanNode {
  readonly 'Relation Name'?: string;
  readonly 'Actual Rows': number;
  readonly 'Actual Loops': number;
  readonly 'Rows Removed by Filter'?: number;
  readonly Plans?: readonly PlanNode[];
}

/** Rows the plan's scans of `tables` read, over every loop: those they returned and those their filters passed over. */
export function rowsRead(node: PlanNode, tables: readonly string[]): number {
  const own = tables.includes(node['Relation Name'] ?? '')
    ? (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0)) * node['Actual Loops']
    : 0;
  return own + (node.Plans ?? []).reduce((sum, child) => sum + rowsRead(child, tables), 0);
}
