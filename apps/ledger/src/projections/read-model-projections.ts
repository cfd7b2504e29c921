import type { EventLog, ProjectionEvent } from '#event-log';
import type { Pool } from 'pg';
import { TOOL_CALL_TABLES, toolCallsProjection } from '../governance/read-models/tool-calls.projection.js';
import { blockReadModelsProjection } from '../sessions/read-models/block-read-models.projection.js';
import { BLOCK_READ_MODEL_TABLES } from '../sessions/read-models/block-read-model-tables.js';
import { REBUILD_PAGE, rebuildProjection, type RebuildResult } from './rebuild.js';
import type { ProjectionDefinition } from './projection.js';

/** Every read model the log can rebuild, with the tables each owns. (The governance saga's consumer is not one: it acts, it does not project.) */
export const READ_MODEL_PROJECTIONS: readonly {
  readonly name: string;
  readonly create: () => ProjectionDefinition<ProjectionEvent>;
  readonly tables: readonly string[];
}[] = [
  { name: 'block-read-models', create: blockReadModelsProjection, tables: BLOCK_READ_MODEL_TABLES },
  { name: 'tool-calls', create: toolCallsProjection, tables: TOOL_CALL_TABLES },
];

export const READ_MODEL_NAMES = READ_MODEL_PROJECTIONS.map((projection) => projection.name);

/** Rebuilds the named read models (all when none are named), one after another, reading `pageSize` events at a time. */
export async function rebuildReadModels(
  pool: Pool,
  eventLog: EventLog,
  names: readonly string[] = READ_MODEL_NAMES,
  pageSize = REBUILD_PAGE,
): Promise<{ name: string; result: RebuildResult }[]> {
  const rebuilt: { name: string; result: RebuildResult }[] = [];
  for (const { name, create, tables } of READ_MODEL_PROJECTIONS.filter((projection) =>
    names.includes(projection.name),
  )) {
    rebuilt.push({ name, result: await rebuildProjection(pool, eventLog, create(), tables, pageSize) });
  }
  return rebuilt;
}
